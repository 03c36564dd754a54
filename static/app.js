// ipledger console helpers. Everything here is an enhancement: every page
// and form works without JavaScript.
(function () {
  "use strict";

  // Copy buttons: <button class="copy" data-copy="10.0.0.1">.
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("button.copy");
    if (!b) return;
    ev.preventDefault();
    var text = b.getAttribute("data-copy") || "";
    var done = function () {
      b.classList.add("done");
      b.setAttribute("title", "copied");
      setTimeout(function () { b.classList.remove("done"); b.setAttribute("title", "Copy " + text); }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else {
      fallbackCopy(text);
      done();
    }
  });

  function fallbackCopy(text) {
    var ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.opacity = "0";
    document.body.appendChild(ta);
    ta.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to do */ }
    document.body.removeChild(ta);
  }

  // Dialogs loaded by htmx into #dialog open themselves; "Cancel" closes
  // them and clears the content, so nothing is left to submit.
  document.addEventListener("htmx:afterSwap", function (ev) {
    var d = ev.target && ev.target.querySelector && ev.target.querySelector("dialog[data-autoopen]");
    if (d && !d.open) d.showModal();
  });
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("[data-close-dialog]");
    if (!b) return;
    var d = b.closest("dialog");
    if (!d) return;
    ev.preventDefault();
    d.close();
  });
  document.addEventListener("close", function (ev) {
    if (ev.target.tagName === "DIALOG" && ev.target.hasAttribute("data-autoopen")) {
      var host = ev.target.parentElement;
      ev.target.remove();
      if (host && host.id === "dialog") host.innerHTML = "";
    }
  }, true);

  // Force delete: the confirm button stays disabled until the machine id is
  // typed exactly (the server checks it again).
  document.addEventListener("input", function (ev) {
    var i = ev.target;
    if (!i.matches || !i.matches("input[data-confirm-id]")) return;
    var form = i.closest("form");
    var btn = form && form.querySelector("button[type=submit]");
    if (btn) btn.disabled = i.value.trim() !== i.getAttribute("data-confirm-id");
  });

  // ExpectedDpu rows are removed in place; the form is validated again.
  // Without JavaScript the same button posts the form, which the server
  // re-renders without the row.
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("[data-remove-row]");
    if (!b) return;
    var row = document.getElementById(b.getAttribute("data-remove-row"));
    if (!row) return;
    ev.preventDefault();
    var form = row.closest("form");
    row.remove();
    var v = form && form.querySelector("[hx-post$='/validate']");
    if (v && window.htmx) window.htmx.trigger(v, "change");
  });

  // Upload progress of the import form.
  document.addEventListener("htmx:xhr:progress", function (ev) {
    var p = document.getElementById("import-progress");
    if (p && ev.detail && ev.detail.lengthComputable) {
      p.value = Math.round(ev.detail.loaded / ev.detail.total * 100);
    }
  });

  // Errors of htmx requests that the server retargets to #toast disappear
  // after a while; network failures get a message too.
  document.addEventListener("htmx:sendError", function () {
    var t = document.getElementById("toast");
    if (t) t.innerHTML = '<div class="alert bad">The server could not be reached. Nothing was changed by this click; try again.</div>';
  });
  document.addEventListener("htmx:afterSwap", function (ev) {
    if (ev.target && ev.target.id === "toast") {
      setTimeout(function () { ev.target.innerHTML = ""; }, 8000);
    }
  });
})();

// Tables wider than the page scroll sideways inside .table-wrap; say so
// above each one that does (and again after htmx swaps or a resize).
(function () {
  "use strict";
  function hints() {
    var wraps = document.querySelectorAll(".table-wrap");
    for (var i = 0; i < wraps.length; i++) {
      var w = wraps[i];
      var h = w.previousElementSibling;
      if (!h || !h.classList.contains("scroll-hint")) {
        h = document.createElement("div");
        h.className = "scroll-hint";
        h.setAttribute("aria-hidden", "true");
        h.textContent = "wider than the screen: scroll sideways →";
        w.parentNode.insertBefore(h, w);
      }
      var wide = w.scrollWidth > w.clientWidth + 1;
      h.classList.toggle("on", wide);
      w.classList.toggle("fits", !wide);
    }
  }
  document.addEventListener("DOMContentLoaded", hints);
  document.addEventListener("htmx:afterSettle", hints);
  window.addEventListener("resize", hints);
})();

// Forms with data-confirm ask before they post (deleting an
// ExpectedMachine, unquarantining a value). Capturing on document runs
// before htmx's own submit handler on the form.
document.addEventListener("submit", function (ev) {
  var f = ev.target;
  var msg = f && f.getAttribute && f.getAttribute("data-confirm");
  if (msg && !window.confirm(msg)) {
    ev.preventDefault();
    ev.stopImmediatePropagation();
  }
}, true);
