// The copy button (and a selection copied from a code block) copies code a reader can paste: from a console session
// (a block whose prompts Pygments marks .gp), only the lines after a `>>> `, `... ` or `$ ` prompt, without the
// prompts, and not the printed output. Material has no such option (squidfunk/mkdocs-material#3647).
const PROMPT = /^(>>>|\.\.\.|\$)( |$)/;

function copyableText(code) {
  const text = code.textContent;
  if (!code.querySelector(".gp")) return text;
  const lines = text.split("\n").filter((line) => PROMPT.test(line));
  return lines.map((line) => line.replace(PROMPT, "")).join("\n") + "\n";
}

document.addEventListener("copy", (event) => {
  const selection = document.getSelection();
  const node = selection && selection.anchorNode;
  const element = node && (node.nodeType === 1 ? node : node.parentElement);
  const code = element && element.closest("pre > code");
  if (!code || !code.querySelector(".gp")) return;
  event.clipboardData.setData("text/plain", copyableText(code));
  event.preventDefault();
});
window.copyableText = copyableText;
