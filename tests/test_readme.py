"""The README's Python examples run as written."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).parents[1] / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs(index):
    exec(compile(python_blocks()[index], f"README.md[python block {index}]", "exec"), {})
