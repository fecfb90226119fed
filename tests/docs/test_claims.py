"""What the README and the documentation say about the main job agrees with its committed results, and the README
reads on its own: no links out of the repository, no internal issue numbers, no guide sending readers to a README
section the site does not show.

The main jobs are listed in ``MAIN_JOBS``: a job names its committed results (``composer compare``'s tables, the
run the README quotes first) and its recipes. A second main job adds an entry there; every check runs on each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class MainJob:
    """A main job: the committed compare table the README quotes, and the other committed runs of the same job."""

    name: str
    results: str  # the run the README's table is (repository path)
    earlier: str  # a glob of the job's other committed runs, which the pages may quote too
    quoted: int  # at least this many figures the pages quote (the README's table and summary, the runs compared)


MAIN_JOBS = [
    MainJob("digits", "recipes/results/digits_compare.md", "recipes/results/digits_compare*.md", quoted=20),
    MainJob("text", "recipes/results/text_compare.md", "recipes/results/text_compare*.md", quoted=10),
]
# The method cards that cite the text job: each card's recipes there (its own, and the combination it is part of).
TEXT_CARDS = {
    "alibi": ("text_alibi", "text_glu_alibi"),
    "seq_length_warmup": ("text_alibi_seqwarmup",),
    "gated_linear_units": ("text_glu", "text_glu_alibi"),
    "factorize": ("text_factorize",),
    "ema": ("text_ema",),
    "low_precision_layernorm": ("text_lowprec_ln",),
}
# Where the figures are quoted: the README, the home page, the guides and the notes the site shows.
PAGES = [ROOT / "README.md", ROOT / "recipes" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FIGURE = re.compile(r"(\d+\.\d\d)x \[(\d+\.\d\d), (\d+\.\d\d)\]")  # a speed-up and its interval: 1.78x [1.62, 2.11]


def _job_text(job: MainJob, text: str) -> str:
    """The parts of a page about ``job``: under a heading that names the text job or task, or else the digits job's."""
    chunks = re.split(r"(?m)^(?=#)", text)
    about_text = [bool(re.match(r"#+ .*\btext (job|task)\b", chunk, re.I)) for chunk in chunks]
    return "".join(chunk for chunk, text_part in zip(chunks, about_text) if text_part == (job.name == "text"))


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def _recipes(job: MainJob) -> set[str]:
    """The job's recipe names, from the first column of its table (digits_baseline, digits_mild, ...)."""
    return {row.split("|")[1].strip() for row in _rows((ROOT / job.results).read_text())[1:]}


def _figures(job: MainJob) -> dict[str, set[str]]:
    """Each recipe's speed-ups with intervals in any committed run of the job (table rows and summary lines)."""
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.glob(job.earlier)):
        for line in path.read_text().splitlines():
            named = re.match(r"^(?:\| |- )(\w+)", line)
            for figure in _FIGURE.finditer(line):
                found.setdefault(named.group(1) if named else "", set()).add(figure.group(0))
    return found


def _short(recipe: str, job: MainJob) -> str:
    return recipe.removeprefix(f"{job.name}_")


def _quoted(job: MainJob, text: str) -> list[tuple[str, str, str]]:
    """(figure, recipe or '', the sentence) for each figure with an interval in ``text``.

    The recipe is the one the sentence names last before the figure (``*mild* reaches the target 1.78x [...]``), in a
    table row the one the row or its column header names; '' when none is named.
    """
    names = "|".join(sorted({_short(r, job) for r in _recipes(job)} | _recipes(job), key=len, reverse=True))
    name = re.compile(rf"\b(?:{names})\b")
    quoted = []
    header: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        for line in paragraph.splitlines() if paragraph.lstrip().startswith("|") else [paragraph]:
            if line.startswith("|") and not _FIGURE.search(line):
                header = line.split("|") if not set(line) <= set("|-: ") else header
                continue
            for sentence in re.split(r"(?<=[.;])\s", line) if not line.startswith("|") else line.split("|"):
                for figure in _FIGURE.finditer(sentence):
                    before = name.findall(sentence[: figure.start()])
                    cell = line.split("|").index(sentence) if line.startswith("|") else -1
                    column = name.findall(header[cell]) if 0 <= cell < len(header) else []
                    row = name.findall(line.split("|")[1]) if line.startswith("|") else []
                    recipe = (column or row or before or [""])[-1]
                    quoted.append((figure.group(0), recipe, sentence.strip()))
    return quoted


@pytest.mark.parametrize("job", MAIN_JOBS, ids=lambda job: job.name)
def test_the_readme_quotes_the_committed_table_and_summary(job):
    committed = (ROOT / job.results).read_text()
    readme = (ROOT / "README.md").read_text()
    table = "\n".join(_rows(committed))
    assert table in readme, f"README.md's results table differs from {job.results}: copy the table from there"
    summary = [line for line in committed.splitlines() if line.startswith(("Baseline best:", "- "))]
    assert summary, f"{job.results} has no summary lines"
    missing = [line for line in summary if line not in readme]
    assert not missing, f"README.md lacks these lines of {job.results}:\n" + "\n".join(missing)


@pytest.mark.parametrize("job", MAIN_JOBS, ids=lambda job: job.name)
def test_every_quoted_speedup_is_a_committed_one_of_the_recipe_it_is_said_of(job):
    figures = _figures(job)
    every = set().union(*figures.values())
    wrong = []
    checked = 0
    for page in PAGES:
        for figure, recipe, sentence in _quoted(job, _job_text(job, page.read_text())):
            checked += 1
            full = recipe if recipe in _recipes(job) else f"{job.name}_{recipe}"
            allowed = figures.get(full, set()) if recipe else every
            if figure not in allowed:
                wrong.append(f"{page.relative_to(ROOT)}: {figure} said of {recipe or 'no recipe'}: {sentence[:120]}")
    assert checked >= job.quoted, "the README quotes the results table: its figures should have been found"
    assert not wrong, f"figures that no committed run of {job.name} has for that recipe:\n" + "\n".join(wrong)


@pytest.mark.parametrize("job", MAIN_JOBS, ids=lambda job: job.name)
def test_every_quoted_baseline_best_and_target_is_a_committed_one(job):
    committed = "\n".join(path.read_text() for path in sorted(ROOT.glob(job.earlier)))
    bests = set(re.findall(r"^Baseline best: (\d+\.\d\d)", committed, re.M))
    targets = set(re.findall(r"^Baseline best: .*Target \(best [-+] [\d.]+\): (\d+\.\d\d)", committed, re.M))
    assert bests and targets, f"{job.earlier}: no 'Baseline best: ... Target (best - ...): ...' lines"
    wrong = []
    for page in PAGES:
        text = " ".join(_job_text(job, page.read_text()).split())
        wrong += [
            f"{page.relative_to(ROOT)}: best {v}%" for v in re.findall(r"best is (\d+\.\d\d)%", text) if v not in bests
        ]
        quoted = re.findall(r"at (\d+\.\d\d)% \(best - [\d.]+\)", text)
        wrong += [f"{page.relative_to(ROOT)}: target {v}%" for v in quoted if v not in targets]
    assert not wrong, f"figures that no committed run of {job.name} has:\n" + "\n".join(wrong)


@pytest.mark.parametrize("card", sorted(TEXT_CARDS))
def test_each_language_model_card_cites_its_committed_text_task_figure(card):
    job = MAIN_JOBS[1]
    text = (ROOT / "composer" / "algorithms" / card / "README.md").read_text()
    section = re.search(r"^### On the text task\n(.*?)(?=^#)", text, re.M | re.S)
    assert section, f"{card}'s card has no '### On the text task' section citing `bash scripts/train text`"
    assert "bash scripts/train text" in section.group(1), f"{card}'s text-task section does not give the command"
    recipes = TEXT_CARDS[card]
    quoted = [figure.group(0) for figure in _FIGURE.finditer(section.group(1))]
    committed = set().union(*(_figures(job).get(recipe, set()) for recipe in recipes))
    assert quoted, f"{card}'s text-task section quotes no speed-up with its interval (as 1.05x [0.98, 1.10])"
    own = {figure.group(0) for figure in _FIGURE.finditer(section.group(1).split("\n\n")[0])}
    assert own & _figures(job).get(recipes[0], set()), f"{card}'s first paragraph quotes no figure of {recipes[0]}"
    wrong = [figure for figure in quoted if figure not in committed]
    assert not wrong, (
        f"{card}'s card quotes {wrong}, which no committed text run has for {recipes}: {sorted(committed)}"
    )


def test_the_figure_check_attributes_figures_to_their_recipe():
    job = MAIN_JOBS[0]
    text = "| run | mild | hot |\n|---|---|---|\n| a | 1.78x [1.62, 2.11] | 9.99x [1.00, 2.00] |\n\nmild is 3.00x [1.00, 2.00]."
    assert [(f, r) for f, r, _ in _quoted(job, text)] == [
        ("1.78x [1.62, 2.11]", "mild"),
        ("9.99x [1.00, 2.00]", "hot"),
        ("3.00x [1.00, 2.00]", "mild"),
    ]
    assert "1.78x [1.62, 2.11]" in _figures(job)["digits_mild"]
    assert "1.78x [1.62, 2.11]" not in _figures(job)["digits_hot"]


def _outside_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def test_the_readme_links_stay_in_the_repository_and_name_no_internal_issue():
    readme = (ROOT / "README.md").read_text()
    outside = re.findall(r"(?<![\w.])\.\./[\w./-]+", readme)
    assert not outside, f"README.md names paths outside the repository: {outside}"
    issues = re.findall(r"\b[Ii]ssues? #?\d+", _outside_code(readme))
    assert not issues, f"README.md names internal issue numbers (say what changed instead): {issues}"


def test_no_page_of_the_site_sends_readers_to_a_readme_section():
    # The site shows the repository's README.md as no page of its own (its home page is docs/index.md), so "the
    # README's ... section" and a link to README.md#anchor lead nowhere there. Method cards and notes are pages.
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "recipes" / "README.md", *(ROOT / "composer").rglob("*.md")]
    bad = []
    for page in pages:
        text = _outside_code(page.read_text())
        bad += [
            f"{page.relative_to(ROOT)}: {m.group(0)!r}"
            for m in re.finditer(r"(?<![/\w])README(\.md)?`?'s [^.]*?\bsection", text)
        ]
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path, _, anchor = target.partition("#")
            if path and (page.parent / path).resolve() == ROOT / "README.md":
                bad.append(f"{page.relative_to(ROOT)}: a link to README.md{'#' + anchor if anchor else ''}")
    assert not bad, "the site has no README sections to send readers to:\n" + "\n".join(bad)
