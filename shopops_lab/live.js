// The page's one live region (made once) says every [data-shopops-live] element as it appears,
// and gives every ipywidgets slider its description as its name (ipywidgets leaves the slider
// handle unnamed); run again by another output, it only does what is new (shopops_lab/live.py).
(() => {
  if (window.shopopsSay) { window.shopopsSay.scan(document.body); return; }
  const region = document.createElement("div");
  region.className = "shopops-announcer";
  region.setAttribute("role", "status");
  region.setAttribute("aria-live", "polite");
  region.setAttribute("aria-atomic", "true");
  region.style.cssText = "position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap";
  document.body.appendChild(region);
  const said = new WeakSet();
  const say = (text) => { region.textContent = text.replace(/\s+/g, " ").trim(); };
  const within = (root, selector) => {
    const found = root.matches && root.matches(selector) ? [root] : [];
    return root.querySelectorAll ? found.concat([...root.querySelectorAll(selector)]) : found;
  };
  const scan = (root) => {
    for (const el of within(root, "[data-shopops-live]")) {
      if (!said.has(el)) { said.add(el); say(el.textContent); }
    }
    for (const slider of within(root, ".widget-slider")) {
      const label = slider.querySelector(".widget-label");
      const name = label ? label.textContent.trim() : "";
      for (const handle of slider.querySelectorAll("[role=slider]:not([aria-label])")) {
        if (name) handle.setAttribute("aria-label", name);
      }
    }
  };
  say.scan = scan;
  new MutationObserver((changes) => {
    for (const change of changes) for (const node of change.addedNodes) if (node.nodeType === 1) scan(node);
  }).observe(document.body, { childList: true, subtree: true });
  window.shopopsSay = say;
  scan(document.body);
})();
