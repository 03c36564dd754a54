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

  // Force delete: the confirm button stays disabled until the host's name
  // (compared in Unicode normal form C, as the server does), its
  // machine_id, or its BMC MAC (in either case, with ':' or '-'
  // throughout: the server's one MAC rule) is typed (the server checks
  // again).
  function macKey(s) {
    s = s.toLowerCase();
    return /^[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}$/.test(s) ? s.replace(/-/g, ":") : null;
  }
  function nfc(s) { return s.normalize ? s.normalize("NFC") : s; }
  function phraseOK(i) {
    var want = i.getAttribute("data-confirm-phrase") || "", got = i.value.trim();
    if (got === "") return false;
    if (nfc(got) === nfc(want) || got === i.getAttribute("data-confirm-id")) return true;
    var k = macKey(got);
    return i.hasAttribute("data-confirm-mac") && k !== null && k === macKey(want);
  }
  function armConfirm(root) {
    var inputs = (root || document).querySelectorAll("input[data-confirm-phrase]");
    for (var k = 0; k < inputs.length; k++) {
      var form = inputs[k].closest("form");
      var btn = form && form.querySelector("button[type=submit]");
      if (btn) btn.disabled = !phraseOK(inputs[k]);
    }
  }
  document.addEventListener("input", function (ev) {
    if (ev.target.matches && ev.target.matches("input[data-confirm-phrase]")) armConfirm(ev.target.closest("form"));
  });
  document.addEventListener("htmx:afterSettle", function () { armConfirm(document); });
  document.addEventListener("DOMContentLoaded", function () { armConfirm(document); });

  // "/" focuses the header's search box (unless typing somewhere already).
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "/" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    var q = document.getElementById("global-q");
    if (!q) return;
    ev.preventDefault();
    q.focus();
    q.select();
  });

  // Sortable tables: a click on a header with data-sort orders the rows
  // of this page by that column (again: the other way). Without
  // JavaScript the rows stay in the server's order.
  function cellKey(row, idx) {
    var c = row.children[idx];
    if (!c) return "";
    var v = c.getAttribute("data-sort-value");
    return (v !== null ? v : c.textContent).trim().toLowerCase();
  }
  function ipKey(s) {
    var m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)/.exec(s);
    if (!m) return null;
    return ((+m[1]) * 16777216 + (+m[2]) * 65536 + (+m[3]) * 256 + (+m[4]));
  }
  function compare(a, b) {
    var ia = ipKey(a), ib = ipKey(b);
    if (ia !== null && ib !== null) return ia - ib;
    var na = parseFloat(a), nb = parseFloat(b);
    if (!isNaN(na) && !isNaN(nb) && /^[\d.,\s%-]+$/.test(a) && /^[\d.,\s%-]+$/.test(b)) return na - nb;
    return a.localeCompare(b, undefined, { numeric: true });
  }
  function initSort(root) {
    var ths = (root || document).querySelectorAll("table[data-sortable] th[data-sort]");
    for (var i = 0; i < ths.length; i++) {
      if (ths[i].hasAttribute("tabindex")) continue;
      ths[i].setAttribute("tabindex", "0");
      ths[i].setAttribute("title", "Sort by " + ths[i].textContent.trim());
      ths[i].classList.add("sortable");
    }
  }
  function sortBy(th) {
    var table = th.closest("table"), tbody = table.tBodies[0];
    var idx = Array.prototype.indexOf.call(th.parentElement.children, th);
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    var ths = th.parentElement.children;
    for (var k = 0; k < ths.length; k++) ths[k].removeAttribute("aria-sort");
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(tbody.rows).filter(function (r) { return !r.querySelector("td[colspan]"); });
    rows.sort(function (x, y) { return dir * compare(cellKey(x, idx), cellKey(y, idx)); });
    for (var j = 0; j < rows.length; j++) tbody.appendChild(rows[j]);
  }
  document.addEventListener("click", function (ev) {
    var th = ev.target.closest && ev.target.closest("table[data-sortable] th[data-sort]");
    if (th) sortBy(th);
  });
  document.addEventListener("keydown", function (ev) {
    var th = ev.target.closest && ev.target.closest("table[data-sortable] th[data-sort]");
    if (th && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); sortBy(th); }
  });
  document.addEventListener("DOMContentLoaded", function () { initSort(document); });
  document.addEventListener("htmx:afterSettle", function () { initSort(document); });

  // A row menu closes when the dialog one of its actions opens appears.
  document.addEventListener("htmx:afterSwap", function (ev) {
    if (!ev.target || ev.target.id !== "dialog") return;
    var open = document.querySelectorAll("details.menu[open]");
    for (var i = 0; i < open.length; i++) open[i].removeAttribute("open");
  });
  // The dashboard refreshes itself like the board; a refresh that fails
  // says since when its figures are those shown (the next good one
  // replaces the line).
  function dashStale(ev) {
    if (!ev.target || ev.target.id !== "dash") return;
    var u = document.getElementById("dash-updated");
    if (u && !u.getAttribute("data-stale")) {
      u.setAttribute("data-stale", "1");
      u.textContent += " — not updated since: the server cannot be reached, retrying";
    }
  }
  document.addEventListener("htmx:sendError", dashStale);
  document.addEventListener("htmx:responseError", dashStale);
  document.addEventListener("htmx:timeout", dashStale);

  // The header's Menu button (shown on a phone) opens and closes the
  // navigation and sign-out; Escape or a click elsewhere closes them.
  // Without JavaScript its #top-menu link opens them (app.css, :target).
  function topMenu(open) {
    var h = document.querySelector("header.top"), b = document.getElementById("menu-toggle");
    if (!h || !b) return;
    h.classList.toggle("menu-open", open);
    b.setAttribute("aria-expanded", open ? "true" : "false");
  }
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest && ev.target.closest("#menu-toggle");
    if (b) {
      ev.preventDefault();
      topMenu(b.getAttribute("aria-expanded") !== "true");
      return;
    }
    var h = document.querySelector("header.top.menu-open");
    if (h && !h.contains(ev.target)) topMenu(false);
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape" && document.querySelector("header.top.menu-open")) topMenu(false);
  });

  // Row menus close when another opens or on a click elsewhere.
  document.addEventListener("click", function (ev) {
    var open = document.querySelectorAll("details.menu[open]");
    for (var i = 0; i < open.length; i++) {
      if (!open[i].contains(ev.target)) open[i].removeAttribute("open");
    }
  });

  // NOC wallboard: when a refresh fails the board says since when it has
  // not been updated, instead of freezing silently; the next good refresh
  // clears it.
  function nocStale(on) {
    var b = document.getElementById("board");
    var s = document.getElementById("noc-stale");
    if (!b || !s) return;
    if (on) {
      s.textContent = "No update since " + (b.getAttribute("data-updated") || "?") + " — the server cannot be reached; retrying every 15 s";
      s.hidden = false;
      document.body.classList.add("stale");
    } else {
      s.hidden = true;
      document.body.classList.remove("stale");
    }
  }
  document.addEventListener("htmx:sendError", function (ev) { if (ev.target && ev.target.id === "board") nocStale(true); });
  document.addEventListener("htmx:responseError", function (ev) { if (ev.target && ev.target.id === "board") nocStale(true); });
  document.addEventListener("htmx:timeout", function (ev) { if (ev.target && ev.target.id === "board") nocStale(true); });
  document.addEventListener("htmx:afterSettle", function () { if (document.getElementById("board")) nocStale(false); });
  // The board refreshes every 15 s, which is too slow to notice a server
  // gone: a light liveness probe every 3 s shows the banner at once, and
  // refreshes the board as soon as the server answers again.
  var nocProbeFailed = false;
  function nocProbe() {
    if (!document.getElementById("board")) return;
    var ctl = window.AbortController ? new AbortController() : null;
    var timer = setTimeout(function () { if (ctl) ctl.abort(); }, 2500);
    fetch("/healthz", {cache: "no-store", credentials: "same-origin", signal: ctl ? ctl.signal : undefined})
      .then(function (r) {
        clearTimeout(timer);
        if (!r.ok) throw new Error("status " + r.status);
        if (nocProbeFailed && window.htmx) {
          window.htmx.ajax("GET", "/noc", {source: "#board", target: "#board", select: "#board", swap: "outerHTML"});
        }
        nocProbeFailed = false;
      })
      .catch(function () { clearTimeout(timer); nocProbeFailed = true; nocStale(true); });
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (document.getElementById("board") && window.fetch) setInterval(nocProbe, 3000);
  });

  // A save and the form's as-you-type check never race: a check sent just
  // before Save could answer after the save's refusal and empty the
  // messages the refusal put in the form. When a form's own request (its
  // save) starts, the checks in flight inside it are aborted, none starts
  // until the save has answered, and an answer to a check sent before the
  // latest save is dropped (docs/console.md "Editing an ExpectedMachine").
  var saves = 0;
  function isCheck(elt) { return !!(elt && elt.matches && elt.matches("[hx-post$='/validate']")); }
  document.addEventListener("htmx:beforeRequest", function (ev) {
    var d = ev.detail || {}, elt = d.elt;
    if (isCheck(elt)) {
      var form = elt.closest("form");
      if (form && form.hasAttribute("data-saving")) { ev.preventDefault(); return; }
      if (d.xhr) d.xhr.ipledgerSaves = saves;
      return;
    }
    if (!elt || elt.tagName !== "FORM") return;
    var checks = elt.querySelectorAll("[hx-post$='/validate']");
    if (checks.length === 0) return;
    saves++;
    elt.setAttribute("data-saving", "");
    for (var i = 0; i < checks.length; i++) {
      if (window.htmx) window.htmx.trigger(checks[i], "htmx:abort");
    }
  });
  document.addEventListener("htmx:afterRequest", function (ev) {
    var elt = ev.detail && ev.detail.elt;
    if (elt && elt.tagName === "FORM") elt.removeAttribute("data-saving");
  });
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var d = ev.detail || {};
    if (isCheck(d.elt) && d.xhr && d.xhr.ipledgerSaves !== saves) ev.preventDefault();
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

  // Upload progress of the import form. Once the file is up the server
  // checks and writes every record in one transaction (several seconds for
  // tens of thousands), which it cannot report piecemeal: the status then
  // says how many records it is processing and counts the seconds until
  // the outcome replaces it (docs/console.md "Import").
  var importRecords = null, importTimer = null;
  document.addEventListener("change", function (ev) {
    if (!ev.target || ev.target.id !== "i-file") return;
    importRecords = null;
    delete ev.target.dataset.records;
    var f = ev.target.files && ev.target.files[0];
    if (!f || !f.text) return;
    f.text().then(function (text) {
      var doc = JSON.parse(text);
      if (doc && Array.isArray(doc.expected_machines) && ev.target.files[0] === f) {
        importRecords = doc.expected_machines.length;
        ev.target.dataset.records = String(importRecords);
      }
    }).catch(function () { /* the server names what is wrong with the file */ });
  });
  function stopImportTimer() {
    if (importTimer) clearInterval(importTimer);
    importTimer = null;
  }
  document.addEventListener("htmx:xhr:progress", function (ev) {
    var p = document.getElementById("import-progress");
    if (!p || !ev.detail || !ev.detail.lengthComputable) return;
    p.value = Math.round(ev.detail.loaded / ev.detail.total * 100);
    var s = document.getElementById("import-status");
    if (!s) return;
    if (ev.detail.loaded < ev.detail.total) {
      s.textContent = "Uploading the file… " + p.value + " %";
      return;
    }
    if (importTimer) return;
    var what = importRecords === null ? "every record"
      : importRecords.toLocaleString("en-US") + (importRecords === 1 ? " record" : " records");
    var head = "Uploaded (" + Math.round(ev.detail.total / 1024) + " KiB). The server is checking and writing " + what + " in one transaction";
    var t0 = Date.now();
    var tick = function () {
      s.textContent = head + "… " + Math.round((Date.now() - t0) / 1000) + " s";
    };
    p.removeAttribute("value"); // indeterminate: the server's work has no percentage
    tick();
    importTimer = setInterval(tick, 1000);
  });
  document.addEventListener("htmx:afterRequest", function (ev) {
    if (!importTimer) return;
    stopImportTimer();
    var p = document.getElementById("import-progress");
    if (p) p.value = 100;
  });

  // A refused save puts its message where the operator is looking: when a
  // form's own request (a submit or a button's click, not as-you-type
  // validation) comes back refused (422, 409, …), the first message in
  // what was swapped in scrolls into view and takes the focus (a field's
  // message gives it to its field). A page that comes back with a
  // refused form (without htmx) does the same.
  function firstError(root) {
    var els = root.querySelectorAll(".alert.bad, .error, [role=alert]");
    for (var i = 0; i < els.length; i++) {
      var e = els[i];
      if (e.textContent.trim() !== "" && e.getClientRects().length > 0) return e;
    }
    return null;
  }
  function showError(root) {
    var e = root && firstError(root);
    if (!e) return;
    var field = e.closest(".field");
    var control = field && field.querySelector("input:not([type=hidden]), select, textarea");
    if (!control) {
      control = e;
      if (!e.hasAttribute("tabindex")) e.setAttribute("tabindex", "-1");
    }
    control.focus({preventScroll: true});
    e.scrollIntoView({block: "center", inline: "nearest"});
  }
  document.addEventListener("htmx:afterSettle", function (ev) {
    var d = ev.detail || {}, cfg = d.requestConfig || {};
    if (!d.xhr || d.xhr.status < 400 || !cfg.triggeringEvent) return;
    if (!/^(submit|click)$/.test(cfg.triggeringEvent.type)) return;
    // An outerHTML swap replaced the target: find its successor by id
    // (getAttribute: a form's .id is its field named "id" when it has one).
    var target = d.target, id = target && target.getAttribute("id");
    if (target && !target.isConnected && id) target = document.getElementById(id);
    if (!target || !target.isConnected || id === "toast") return;
    showError(target);
  });
  document.addEventListener("DOMContentLoaded", function () {
    var forms = document.querySelectorAll("main form");
    for (var i = 0; i < forms.length; i++) {
      if (firstError(forms[i])) { showError(forms[i]); return; }
    }
  });

  // Errors of htmx requests that the server retargets to #toast disappear
  // after a while; network failures get a message too.
  document.addEventListener("htmx:sendError", function (ev) {
    if (ev.target && (ev.target.id === "board" || ev.target.id === "dash")) return;
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
