"""The item browser's script: filters, sorting, paging and item details, rendered from the JSON blob.

Every value from the data is written with ``textContent`` or as an attribute value, never parsed as
markup.  When the first render is done the script sets ``data-ready="1"`` on ``<body>``; an
uncaught error sets ``data-error`` (headless tests read both from the DOM).  ``#item-N`` in the
address opens item N (its position in ``results.latest.jsonl``, from 0); ``#filter:task=T&order=worst&limit=20``
(keys task, model, status, min, max, order, limit) sets the filters, so a view can be linked.
"""

SCRIPT = r"""
(function () {
  "use strict";
  var body = document.body;
  window.onerror = function (message, source, line) {
    body.setAttribute("data-error", String(message) + " (line " + line + ")");
  };
  var data = JSON.parse(document.getElementById("items-data").textContent);
  var items = data.items, MEDIA = data.media;
  var PAGE = 50;
  var state = {task: "", model: "", status: "", min: "", max: "", order: "line", limit: 0, page: 0};
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) { Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); }); }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function fmt(value, digits) {
    return (value === null || value === undefined) ? "\u2013" : Number(value).toFixed(digits === undefined ? 3 : digits);
  }
  function unique(key) {
    var seen = {};
    items.forEach(function (it) { seen[it[key]] = true; });
    return Object.keys(seen).sort();
  }
  function fillSelect(id, values) {
    var select = document.getElementById(id);
    values.forEach(function (v) { select.appendChild(el("option", {value: v}, v)); });
  }

  function statusOk(item) {
    switch (state.status) {
      case "scored": return item.status === "scored";
      case "error": return item.status === "error";
      case "passed": return item.passed === true;
      case "failed": return item.passed === false;
      case "reason": return item.reason !== null;
      default: return true;
    }
  }
  function matches(item) {
    if (state.task && item.task !== state.task) { return false; }
    if (state.model && item.model !== state.model) { return false; }
    if (!statusOk(item)) { return false; }
    var lo = parseFloat(state.min), hi = parseFloat(state.max);
    if (!isNaN(lo) && (item.score === null || item.score < lo)) { return false; }
    if (!isNaN(hi) && (item.score === null || item.score > hi)) { return false; }
    return true;
  }
  function selection() {
    var list = items.filter(matches);
    if (state.order === "worst" || state.order === "best") {
      var sign = state.order === "worst" ? 1 : -1;
      list = list.filter(function (it) { return it.score !== null; });
      list.sort(function (a, b) { return sign * (a.score - b.score) || a.n - b.n; });
    }
    return state.limit > 0 ? list.slice(0, state.limit) : list;
  }

  function scoreCell(item) {
    var td = el("td", {"class": "num"});
    if (item.status === "error") { td.appendChild(el("span", {"class": "badge error"}, "error")); return td; }
    var bar = el("span", {"class": "bar"});
    var fill = el("span", {"class": "fill"});
    fill.style.width = Math.round(100 * item.score) + "%";
    bar.appendChild(fill);
    td.appendChild(el("span", null, fmt(item.score)));
    td.appendChild(bar);
    return td;
  }
  function firstImage(item) {
    for (var i = 0; i < item.media.length; i++) {
      if (item.media[i].kind === "image" && item.media[i].src !== undefined) { return item.media[i]; }
    }
    return null;
  }
  function summaryRow(item) {
    var tr = el("tr", {"class": "item " + item.status, "data-n": String(item.n), tabindex: "0"});
    tr.appendChild(el("td", {"class": "num"}, item.line === null ? "" : item.line));
    tr.appendChild(el("td", null, item.task));
    tr.appendChild(el("td", null, item.model === "None" ? "" : item.model));
    tr.appendChild(el("td", {"class": "id"}, item.id + (item.sample ? " #" + item.sample : "")));
    tr.appendChild(scoreCell(item));
    tr.appendChild(el("td", null, item.passed === null ? "" : (item.passed ? "pass" : "fail")));
    var note = item.error ? item.error.code + ": " + item.error.message : (item.reason || "");
    tr.appendChild(el("td", {"class": "note"}, note));
    var thumb = el("td", {"class": "thumb"});
    var image = firstImage(item);
    if (image) { thumb.appendChild(el("img", {src: MEDIA[image.src], alt: image.label, loading: "lazy"})); }
    else if (item.media.some(function (m) { return m.kind === "audio"; })) { thumb.appendChild(el("span", {"class": "badge"}, "audio")); }
    tr.appendChild(thumb);
    tr.addEventListener("click", function () { toggle(tr, item); });
    tr.addEventListener("keydown", function (e) { if (e.key === "Enter") { toggle(tr, item); } });
    return tr;
  }
  function toggle(tr, item) {
    var next = tr.nextSibling;
    if (next && next.classList.contains("detail")) { next.parentNode.removeChild(next); return; }
    var row = el("tr", {"class": "detail"});
    var td = el("td", {colspan: "8"});
    td.appendChild(detail(item));
    row.appendChild(td);
    tr.parentNode.insertBefore(row, tr.nextSibling);
  }

  function section(title) {
    var div = el("div", {"class": "section"});
    div.appendChild(el("h4", null, title));
    return div;
  }
  function imageFigure(media) {
    var fig = el("figure", {"class": "media"});
    var frame = el("div", {"class": "frame"});
    frame.appendChild(el("img", {src: MEDIA[media.src], alt: media.label}));
    if (media.boxes.length) {
      var svg = document.createElementNS(SVG, "svg");
      svg.setAttribute("viewBox", "0 0 " + media.w + " " + media.h);
      svg.setAttribute("preserveAspectRatio", "none");
      media.boxes.forEach(function (b) {
        ["halo", "box " + b.kind].forEach(function (cls) {
          var r = document.createElementNS(SVG, "rect");
          r.setAttribute("x", b.box[0]); r.setAttribute("y", b.box[1]);
          r.setAttribute("width", Math.max(b.box[2] - b.box[0], 0));
          r.setAttribute("height", Math.max(b.box[3] - b.box[1], 0));
          r.setAttribute("class", cls);
          r.setAttribute("vector-effect", "non-scaling-stroke");
          var title = document.createElementNS(SVG, "title");
          title.textContent = b.label;
          r.appendChild(title);
          svg.appendChild(r);
        });
      });
      frame.appendChild(svg);
    }
    fig.appendChild(frame);
    var caption = el("figcaption", null, media.label + " (" + media.w + "\u00d7" + media.h + ")");
    var kinds = {};
    media.boxes.forEach(function (b) { kinds[b.kind] = b.label; });
    Object.keys(kinds).sort().forEach(function (k) {
      var key = el("span", {"class": "key"});
      key.appendChild(el("span", {"class": "swatch " + k}));
      key.appendChild(document.createTextNode(kinds[k]));
      caption.appendChild(key);
    });
    fig.appendChild(caption);
    return fig;
  }
  function audioFigure(media) {
    var fig = el("figure", {"class": "media audio"});
    fig.appendChild(el("img", {src: MEDIA[media.plot], alt: "envelope of " + media.label, "class": "plot"}));
    fig.appendChild(el("audio", {controls: "", preload: "none", src: MEDIA[media.src]}));
    fig.appendChild(el("figcaption", null, media.label + (media.caption ? " \u2014 " + media.caption : "")));
    return fig;
  }
  function mediaSection(item) {
    var div = section("media");
    if (item.media_note) { div.appendChild(el("p", {"class": "muted"}, item.media_note)); }
    item.media.forEach(function (m) {
      if (m.problem) { div.appendChild(el("p", {"class": "problem"}, m.label + ": " + m.problem)); }
      else if (m.kind === "image") { div.appendChild(imageFigure(m)); }
      else { div.appendChild(audioFigure(m)); }
    });
    return div;
  }
  function judgeSection(item) {
    var div = section("judge questions (" + item.judge.length + ")");
    item.judge.forEach(function (q) {
      var box = el("details", {"class": "judge"});
      box.appendChild(el("summary", null, q.step + " \u2192 " + q.verdict + "  [" + q.role + ", " + q.judge + ", " + q.template + "]"));
      box.appendChild(el("pre", {"class": "prompt"}, q.prompt));
      box.appendChild(el("pre", {"class": "reply"}, q.reply));
      div.appendChild(box);
    });
    return div;
  }
  function alignmentSection(item) {
    var a = item.alignment;
    var div = section("transcript vs. text (" + (a.unit === "word" ? "WER " : "CER ") + fmt(a.error_rate) + ")");
    var p = el("p", {"class": "alignment"});
    var sep = a.unit === "word" ? " " : "";
    a.ops.forEach(function (op) {
      if (op.op === "equal") { p.appendChild(el("span", {"class": "eq"}, op.ref)); }
      if (op.op === "substitute" || op.op === "delete") { p.appendChild(el("del", {title: op.op}, op.ref)); }
      if (op.op === "substitute" || op.op === "insert") { p.appendChild(el("ins", {title: op.op}, op.hyp)); }
      p.appendChild(document.createTextNode(sep));
    });
    div.appendChild(p);
    return div;
  }
  function componentsTable(item) {
    var div = section("components");
    var table = el("table", {"class": "components"});
    Object.keys(item.components).forEach(function (k) {
      var tr = el("tr");
      var v = item.components[k];
      tr.appendChild(el("th", null, k));
      tr.appendChild(el("td", {"class": "num"}, typeof v === "number" ? fmt(v, 4) : JSON.stringify(v)));
      table.appendChild(tr);
    });
    div.appendChild(table);
    return div;
  }
  function textSection(title, texts) {
    var div = section(title);
    texts.forEach(function (t) { div.appendChild(el("pre", {"class": "text"}, t)); });
    return div;
  }
  function detail(item) {
    var box = el("div", {"class": "detail-box"});
    box.appendChild(el("p", {"class": "muted"}, item.verifier + " \u00b7 line " + item.line + " \u00b7 " + item.id));
    if (item.error) { box.appendChild(el("p", {"class": "problem"}, item.error.code + ": " + item.error.message)); }
    if (item.reason) { box.appendChild(el("p", {"class": "reason"}, "reason: " + item.reason)); }
    if (item.instruction) { box.appendChild(textSection("instruction", [item.instruction])); }
    if (item.texts.length) { box.appendChild(textSection("response text", item.texts)); }
    if (item.media.length || item.media_note) { box.appendChild(mediaSection(item)); }
    if (item.alignment) { box.appendChild(alignmentSection(item)); }
    else if (item.transcripts.length) { box.appendChild(textSection("transcripts", item.transcripts)); }
    if (item.judge.length) { box.appendChild(judgeSection(item)); }
    if (Object.keys(item.components).length) { box.appendChild(componentsTable(item)); }
    if (item.evidence) { box.appendChild(textSection("evidence", [item.evidence])); }
    return box;
  }

  function render() {
    var list = selection();
    var pages = Math.max(1, Math.ceil(list.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    var tbody = document.getElementById("item-rows");
    tbody.textContent = "";
    list.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (item) { tbody.appendChild(summaryRow(item)); });
    document.getElementById("item-count").textContent = list.length + " of " + items.length + " items";
    document.getElementById("page-info").textContent = "page " + (state.page + 1) + " of " + pages;
    body.setAttribute("data-shown", String(list.length));
  }
  function bind(id, key, parse) {
    var input = document.getElementById(id);
    input.addEventListener("input", function () { state[key] = parse ? parse(input.value) : input.value; state.page = 0; render(); });
  }

  fillSelect("f-task", unique("task"));
  fillSelect("f-model", unique("model"));
  bind("f-task", "task"); bind("f-model", "model"); bind("f-status", "status");
  bind("f-min", "min"); bind("f-max", "max"); bind("f-order", "order");
  bind("f-limit", "limit", function (v) { return Math.max(parseInt(v, 10) || 0, 0); });
  document.getElementById("prev").addEventListener("click", function () { state.page = Math.max(state.page - 1, 0); render(); });
  document.getElementById("next").addEventListener("click", function () { state.page += 1; render(); });
  Array.prototype.forEach.call(document.querySelectorAll("a[data-task]"), function (a) {
    a.addEventListener("click", function () {
      state.task = a.getAttribute("data-task"); state.page = 0;
      document.getElementById("f-task").value = state.task;
      render();
    });
  });
  function openFromHash() {
    var match = /^#item-(\d+)$/.exec(window.location.hash);
    if (!match) { return; }
    var n = parseInt(match[1], 10);
    var position = selection().map(function (it) { return it.n; }).indexOf(n);
    if (position < 0) { return; }
    state.page = Math.floor(position / PAGE);
    render();
    var tr = document.querySelector('tr.item[data-n="' + n + '"]');
    toggle(tr, items[n]);
    tr.scrollIntoView();
  }
  function applyFilterHash() {
    var prefix = "#filter:";
    if (window.location.hash.indexOf(prefix) !== 0) { return false; }
    var params = new URLSearchParams(window.location.hash.slice(prefix.length));
    ["task", "model", "status", "min", "max", "order", "limit"].forEach(function (key) {
      if (!params.has(key)) { return; }
      var value = params.get(key);
      state[key] = key === "limit" ? Math.max(parseInt(value, 10) || 0, 0) : value;
      document.getElementById("f-" + key).value = value;
    });
    state.page = 0;
    render();
    document.getElementById("items").scrollIntoView();
    return true;
  }
  function onHash() {
    if (!applyFilterHash()) { openFromHash(); }
  }
  if (unique("model").length < 2) { document.getElementById("f-model-label").style.display = "none"; }
  render();
  onHash();
  window.addEventListener("hashchange", onHash);
  body.setAttribute("data-ready", "1");
})();
"""
