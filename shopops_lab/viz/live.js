// The page's one live region (made once) says every [data-shopops-live] element as it appears
// (shopops_lab/viz/live.py); run again by another output, it says only what is new.
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
  const scan = (root) => {
    const found = root.matches && root.matches("[data-shopops-live]") ? [root] : [];
    for (const el of root.querySelectorAll ? root.querySelectorAll("[data-shopops-live]") : []) found.push(el);
    for (const el of found) { if (!said.has(el)) { said.add(el); say(el.textContent); } }
  };
  say.scan = scan;
  new MutationObserver((changes) => {
    for (const change of changes) for (const node of change.addedNodes) if (node.nodeType === 1) scan(node);
  }).observe(document.body, { childList: true, subtree: true });
  window.shopopsSay = say;
  scan(document.body);
})();
