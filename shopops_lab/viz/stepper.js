// The step-through viewer's buttons and keys (shopops_lab/viz/stepper.py): one moment shown at a
// time, each said in the viewer's own live region.
(() => {
  const here = document.currentScript;
  const root = here ? here.closest(".shopops-stepper") : null;
  if (!root || root.dataset.ready) return;
  root.dataset.ready = "1";
  const items = [...root.querySelectorAll("li.shopops-moment")];
  const live = root.querySelector(".shopops-stepper-live");
  const position = root.querySelector(".shopops-stepper-position");
  const back = root.querySelector(".shopops-back");
  const next = root.querySelector(".shopops-next");
  let at = 0;
  const show = (k, speak) => {
    at = Math.max(0, Math.min(items.length - 1, k));
    items.forEach((li, i) => {
      li.hidden = i !== at;
      if (i === at) li.setAttribute("aria-current", "step"); else li.removeAttribute("aria-current");
    });
    position.textContent = items[at].dataset.label;
    back.setAttribute("aria-disabled", String(at === 0));
    next.setAttribute("aria-disabled", String(at === items.length - 1));
    if (speak) live.textContent = items[at].dataset.say;
  };
  back.addEventListener("click", () => show(at - 1, true));
  next.addEventListener("click", () => show(at + 1, true));
  root.addEventListener("keydown", (event) => {
    const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: items.length - 1 }[event.key];
    if (to === undefined || event.altKey || event.ctrlKey || event.metaKey) return;
    event.preventDefault();
    event.stopPropagation();
    show(to, true);
  });
  root.querySelector(".shopops-stepper-controls").hidden = false;
  show(0, false);
})();
