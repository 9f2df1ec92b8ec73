// negtrain view: the overview, one page per eval set (contrast groups, filters, paging) and A vs B.
// Every value from the data files (model output included) reaches the page through textContent or
// a text node: never innerHTML, so a response holding markup shows as text and runs nothing.
"use strict";

(function () {
  const INDEX = window.NEGTRAIN_INDEX;
  const PAGE_SIZE = 25;
  const ADJUST = { holm: "Holm–Bonferroni", bh: "Benjamini–Hochberg" };
  const app = document.getElementById("app");
  const where = document.getElementById("where");
  const loaded = {};

  // An element with attributes and children; strings become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "onclick" || k === "oninput" || k === "onchange") node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  // replaceChildren, leaving out absent parts (a filter a benchmark does not have).
  function fill(node, ...children) {
    node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  }

  // A metric value: "-" where the metric is absent (undefined); "undefined" where it was computed
  // and is NaN or infinite (the site data writes those as null, JSON having neither).
  const UNDEFINED = "undefined";
  function notFinite(v) { return v === null || !Number.isFinite(v); }
  function fmt(v) { return v === undefined ? "-" : notFinite(v) ? UNDEFINED : v.toFixed(4); }
  function fmtP(p) { return p === null || p === undefined ? "-" : p >= 0.001 ? p.toFixed(4) : p.toPrecision(3); }
  function signed(v) { return v === undefined ? "-" : notFinite(v) ? UNDEFINED : (v >= 0 ? "+" : "") + v.toFixed(4); }
  // As the card prints a number: 4 decimals, the 95% interval in brackets; counts as integers.
  function withCi(value, spread, count) {
    if (value === undefined || notFinite(value)) return fmt(value);
    if (count) return String(Math.round(value));
    const ci = spread && spread.ci95;
    return fmt(value) + (ci && ci[0] !== null && ci[0] !== undefined ? ` [${fmt(ci[0])}, ${fmt(ci[1])}]` : "");
  }

  function loadSet(key) {
    if (loaded[key]) return loaded[key];
    loaded[key] = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = `data/${key}.js`;
      s.charset = "utf-8";
      s.onload = () => resolve(window.NEGTRAIN_SETS[key]);
      s.onerror = () => reject(new Error(`cannot load data/${key}.js`));
      document.head.appendChild(s);
    });
    return loaded[key];
  }

  function setLabel(src, set) { return `${src.label}: ${set.name}`; }

  // ------------------------------------------------------------------ overview
  function curves(run) {
    const box = el("div", {});
    for (const [name, metrics] of Object.entries(run.curves || {})) {
      const info = (run.sets.find((s) => s.name === name) || {}).info || {};
      const keys = Object.keys(metrics).filter((k) => info[k] ? (info[k].role === "headline" || info[k].role === "consistency") : k === "accuracy");
      for (const key of keys) box.appendChild(curve(`${name} ${key}`, metrics[key]));
    }
    return box;
  }

  function curve(title, points) {
    const NS = "http://www.w3.org/2000/svg";
    const W = 260, H = 150, L = 40, B = 24, T = 18;
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "curve");
    svg.setAttribute("width", W);
    svg.setAttribute("height", H);
    const add = (tag, attrs, text) => {
      const n = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      svg.appendChild(n);
      return n;
    };
    add("text", { x: 4, y: 12 }, title);
    const pts = points.filter((p) => p[1] !== null);
    if (!pts.length) { add("text", { x: L, y: H / 2 }, "undefined"); return svg; }
    const xs = points.map((p) => p[0]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs);
    let y0 = Math.min(...pts.map((p) => p[1])), y1 = Math.max(...pts.map((p) => p[1]));
    if (y1 - y0 < 1e-9) { y0 -= 0.05; y1 += 0.05; }
    const X = (x) => L + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (W - L - 10);
    const Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    add("line", { x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999" });
    add("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" });
    add("text", { x: 2, y: T + 8 }, y1.toFixed(3));
    add("text", { x: 2, y: H - B }, y0.toFixed(3));
    for (const x of xs) add("text", { x: X(x) - 3, y: H - 8 }, String(x));
    add("polyline", { points: pts.map((p) => `${X(p[0])},${Y(p[1])}`).join(" "), fill: "none", stroke: "#1565c0", "stroke-width": 2 });
    for (const p of pts) add("circle", { cx: X(p[0]), cy: Y(p[1]), r: 3, fill: "#1565c0" }).appendChild(
      Object.assign(document.createElementNS(NS, "title"), { textContent: `epoch ${p[0]}: ${fmt(p[1])}` }));
    return svg;
  }

  function protocolBlocks(blocks) {
    const box = el("div", { class: "protocol" });
    for (const b of blocks) {
      if (b.text !== undefined) box.appendChild(el("p", {}, b.text));
      else box.appendChild(el("table", {}, el("tr", {}, b.headers.map((h) => el("th", {}, h))),
        b.rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
    }
    return box;
  }

  function overview() {
    where.textContent = "";
    const parts = [el("h1", {}, "Overview")];
    for (const w of INDEX.warnings) parts.push(el("p", { class: "warn" }, "warning: " + w));
    const runsShown = new Set();
    INDEX.sources.forEach((src, i) => {
      parts.push(el("h2", {}, `${src.label} (${src.kind})`));
      if (src.kind === "run" && !runsShown.has(src.label.replace(/ epoch \d+$/, ""))) {
        runsShown.add(src.label.replace(/ epoch \d+$/, ""));
        parts.push(el("h3", {}, "Per epoch"), curves(src));
      }
      for (const h of src.heads || []) parts.push(el("p", { class: "warn" }, h));
      if (src.protocol) parts.push(el("h3", {}, "The paper's table"), protocolBlocks(src.protocol));
      const rows = [];
      for (const set of src.sets) {
        const keys = Object.keys(set.metrics).filter((k) => !(set.info[k] || {}).detail);  // details: metrics.jsonl
        const base = set.baseline;
        const shown = base ? [...keys.slice(0, keys.indexOf(base.metric) + 1), "baseline", ...keys.slice(keys.indexOf(base.metric) + 1)] : keys;
        shown.forEach((k, j) => {
          const info = set.info[k] || {};
          const first = j === 0 ? el("td", { rowspan: shown.length }, el("a", { href: `#set/${set.key}`, class: "set-link" }, set.name)) : null;
          if (k === "baseline") {
            const named = ["majority", "chance"].filter((b) => typeof base[b] === "number");
            rows.push(el("tr", { "data-set": set.name, "data-metric": "baseline" }, first, el("td", {}, `baseline of ${base.metric}`),
              el("td", { class: "num metric-value" }, named.map((b) => `${fmt(base[b])} (${b})`).join(", ")),
              el("td", {}, "from the data, not the model: majority = the best constant prediction; chance = uniform guessing")));
            return;
          }
          const what = info.count ? "count" : info.role === "baseline" ? "from the data, not the model"
            : info.higher === false ? "lower is better" : "higher is better";
          const value = k === "n" && set.subset ? `${withCi(set.metrics[k], null, true)} of ${set.subset.of} (cut by ${set.subset.cut_by})`
            : withCi(set.metrics[k], set.uncertainty[k], info.count);
          rows.push(el("tr", { "data-set": set.name, "data-metric": k }, first,
            el("td", {}, k),
            el("td", { class: "num metric-value" }, value),
            el("td", { class: base && k === base.metric && set.at_or_below ? "warn" : "" },
              base && k === base.metric && set.at_or_below ? what + "; at or below its baseline" : what)));
        });
      }
      parts.push(el("table", { class: "overview", "data-source": i },
        el("tr", {}, el("th", {}, "benchmark"), el("th", {}, "metric"), el("th", {}, "value [95% CI]"), el("th", {}, "")), rows));
    });
    if (INDEX.pairs.length) {
      parts.push(el("h2", {}, "A vs B"));
      INDEX.pairs.forEach((pair, p) => {
        const a = INDEX.sources[pair.a], b = INDEX.sources[pair.b];
        parts.push(el("p", { class: "sets" }, `A = ${a.label}, B = ${b.label}: `,
          pair.evals.map((ev, e) => el("a", { href: `#ab/${p}/${e}`, class: "ab-link" }, ev.name))));
      });
    }
    fill(app, ...parts);
  }

  // ------------------------------------------------------------------ one eval set
  function findSet(key) {
    for (const src of INDEX.sources) for (const set of src.sets) if (set.key === key) return [src, set];
    return [null, null];
  }

  // A group is "inconsistent" when the metric scored it (all members predicted) and not all are
  // right; where the metric defines no group columns: every member predicted and one wrong.
  function groupState(data, g) {
    const G = data.groups;
    if (G.scored[g] !== null) return G.scored[g] ? (G.right[g] ? "right" : "inconsistent") : "not scored";
    const c = G.members[g].map((i) => data.examples.correct[i]);
    if (c.some((x) => x === null)) return "not scored";
    return c.every((x) => x === 1) ? "right" : "inconsistent";
  }

  function matches(data, i, q) {
    const E = data.examples;
    const texts = [E.id[i], E.gold[i], E.prediction[i], ...E.inputs[i]];
    if (E.prompt) texts.push(E.prompt[i]);
    if (E.response) texts.push(E.response[i]);
    return texts.some((t) => t !== null && t !== undefined && String(t).toLowerCase().includes(q));
  }

  function memberTable(data, members, keep, extra) {
    const E = data.examples;
    const n = E.inputs[members[0]] ? E.inputs[members[0]].length : 1;
    const head = [data.subsets.length ? "condition" : null, "id", ...Array.from({ length: n }, (_, k) => n === 2 ? ["premise", "hypothesis"][k] : `input ${k + 1}`),
      "gold", ...(extra ? extra.head : ["prediction", "correct"]), ...data.lm_fields];
    const rows = members.map((i) => {
      const c = E.correct[i];
      const cls = [c === 1 ? "right" : c === 0 ? "wrong" : "", keep(i) ? "" : "dim"].join(" ").trim();
      return el("tr", { class: cls || null, "data-id": E.id[i] },
        data.subsets.length ? el("td", {}, E.subset[i] || "") : null,
        el("td", {}, E.id[i]),
        E.inputs[i].map((t) => el("td", {}, t)),
        el("td", {}, E.gold[i] === null ? "-" : E.gold[i]),
        extra ? extra.cells(i) : [el("td", { class: "prediction" }, E.prediction[i] === null ? "(unparsed)" : E.prediction[i]),
          el("td", { class: "mark" }, c === 1 ? "right" : c === 0 ? "wrong" : "-")],
        data.lm_fields.map((f) => el("td", { class: f }, lmCell(f, E[f][i]))));
    });
    return el("table", {}, el("tr", {}, head.filter((h) => h !== null).map((h) => el("th", {}, h))), rows);
  }

  function lmCell(field, value) {
    if (value === null || value === undefined) return "-";
    if (field === "shots") return Array.isArray(value) ? value.join(", ") : String(value);
    if (field === "unparsed") return value ? "yes" : "no";
    return el("details", {}, el("summary", {}, String(value).slice(0, 60) + (String(value).length > 60 ? "…" : "")), el("pre", {}, String(value)));
  }

  function pager(total, page, go) {
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    return el("div", { class: "pager" },
      el("button", { id: "prev", disabled: page <= 0, onclick: () => go(page - 1) }, "previous"),
      el("span", { id: "page" }, `page ${page + 1} of ${pages}`),
      el("button", { id: "next", disabled: page >= pages - 1, onclick: () => go(page + 1) }, "next"));
  }

  function setPage(key) {
    const [src, set] = findSet(key);
    if (!set) return notFound();
    where.textContent = setLabel(src, set);
    fill(app, el("p", {}, "Loading " + set.name + "…"));
    loadSet(key).then((data) => renderSet(src, set, data), (err) => fill(app, el("p", { class: "warn" }, String(err))));
  }

  function renderSet(src, set, data) {
    const E = data.examples, G = data.groups;
    const state = { inconsistent: false, subset: "", correct: "", q: "", page: 0 };
    // The card's name for "groups scored all right" where the metric scores groups (consistency,
    // NaN-NLI's strict); else the viewer's own count, named as such (TINAD's coherence is another rule).
    const consistencyName = G.scored.length && G.scored[0] !== null
      ? (Object.keys(set.info).find((k) => set.info[k].role === "consistency" && !k.includes("/")) || "consistency")
      : "groups with every member right (the viewer's count, not a card metric)";
    const counts = el("div", { class: "counts", id: "counts" });
    const list = el("div", { id: "groups" });
    const filters = el("div", { class: "filters" },
      data.grouped ? el("label", {}, el("input", { type: "checkbox", id: "f-inconsistent", onchange: (e) => { state.inconsistent = e.target.checked; state.page = 0; draw(); } }), " inconsistent groups only") : null,
      data.subsets.length ? el("label", {}, "condition ", el("select", { id: "f-subset", onchange: (e) => { state.subset = e.target.value; state.page = 0; draw(); } },
        el("option", { value: "" }, "all"), data.subsets.map((s) => el("option", { value: s }, s)))) : null,
      data.has_correct ? el("label", {}, "members ", el("select", { id: "f-correct", onchange: (e) => { state.correct = e.target.value; state.page = 0; draw(); } },
        el("option", { value: "" }, "all"), el("option", { value: "right" }, "right"), el("option", { value: "wrong" }, "wrong"))) : null,
      el("label", {}, "search ", el("input", { type: "search", id: "f-search", oninput: (e) => { state.q = e.target.value.toLowerCase(); state.page = 0; draw(); } })));

    function keepExample(i) {
      if (state.subset && E.subset[i] !== state.subset) return false;
      if (state.correct === "right" && E.correct[i] !== 1) return false;
      if (state.correct === "wrong" && E.correct[i] !== 0) return false;
      if (state.q && !matches(data, i, state.q)) return false;
      return true;
    }

    function draw() {
      const shown = [];
      let seen = 0, right = 0, examples = 0;
      for (let g = 0; g < G.name.length; g++) {
        if (state.inconsistent && groupState(data, g) !== "inconsistent") continue;
        const kept = G.members[g].filter(keepExample);
        if (!kept.length) continue;
        shown.push(g);
        examples += kept.length;
        for (const i of kept) if (E.correct[i] !== null) { seen += 1; right += E.correct[i]; }
      }
      // The card's numbers for the filter's denominator: accuracy (of the condition) over every
      // predicted example, consistency over the groups the metric scored.
      let all = 0, allRight = 0, scored = 0, scoredRight = 0, inconsistent = 0;
      for (let i = 0; i < E.id.length; i++) {
        if (state.subset && E.subset[i] !== state.subset) continue;
        if (E.correct[i] !== null) { all += 1; allRight += E.correct[i]; }
      }
      for (let g = 0; g < G.name.length; g++) {
        const st = groupState(data, g);
        if (st !== "not scored") { scored += 1; if (st === "right") scoredRight += 1; else inconsistent += 1; }
      }
      const acc = state.subset ? `accuracy/${state.subset}` : "accuracy";
      fill(counts, 
        data.has_correct ? el("span", {}, `${acc}: `, el("b", { id: "count-accuracy" }, fmt(all ? allRight / all : null)), ` (${allRight} of ${all} right)`) : null,
        data.grouped ? el("span", {}, `${consistencyName}: `, el("b", { id: "count-consistency" }, fmt(scored ? scoredRight / scored : null)),
          ` (${scoredRight} of ${scored} groups scored all right; `, el("b", { id: "count-inconsistent" }, String(inconsistent)), " inconsistent)") : null,
        el("span", {}, "shown: ", el("b", { id: "count-shown" }, String(shown.length)), ` ${data.grouped ? "groups" : "examples"}, ${examples} examples` +
          (data.has_correct ? ` (${right} of ${seen} right)` : "")));
      const page = Math.min(state.page, Math.max(0, Math.ceil(shown.length / PAGE_SIZE) - 1));
      const cards = shown.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE).map((g) => {
        const st = groupState(data, g);
        return el("div", { class: "group " + (st === "inconsistent" ? "bad" : st === "right" ? "good" : ""), "data-group": G.name[g] },
          el("h3", {}, data.grouped ? `${G.name[g]}: ${st}` : G.name[g]), memberTable(data, G.members[g], keepExample));
      });
      fill(list, pager(shown.length, page, (p) => { state.page = p; draw(); }), ...cards);
    }

    const info = el("table", {}, el("tr", {}, el("th", {}, "metric"), el("th", {}, "card value [95% CI]")),
      Object.keys(set.metrics).filter((k) => !(set.info[k] || {}).detail).map((k) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, withCi(set.metrics[k], set.uncertainty[k], (set.info[k] || {}).count)))));
    fill(app, el("h1", {}, set.name), el("p", {}, `${src.label}; ${E.id.length} examples predicted`),
      ...data.notes.map((n) => el("p", { class: "warn" }, "note: " + n)), info, filters, counts, list);
    draw();
  }

  // ------------------------------------------------------------------ A vs B
  function abPage(p, e) {
    const pair = INDEX.pairs[p], ev = pair && pair.evals[e];
    if (!ev) return notFound();
    const a = INDEX.sources[pair.a], b = INDEX.sources[pair.b];
    where.textContent = `A vs B: ${ev.name}`;
    fill(app, el("p", {}, "Loading…"));
    Promise.all([loadSet(ev.a_key), loadSet(ev.b_key)]).then(([da, db]) => renderAb(pair, ev, a, b, da, db),
      (err) => fill(app, el("p", { class: "warn" }, String(err))));
  }

  function renderAb(pair, ev, a, b, da, db) {
    const EA = da.examples, EB = db.examples;
    const posB = new Map(EB.id.map((id, i) => [id, i]));
    const total = pair.evals.reduce((n, x) => n + Object.values(x.metrics).filter((m) => m.p !== null).length, 0);
    const stats = el("table", { id: "ab-stats" },
      el("tr", {}, ["metric", "A", "B", "B − A", "95% CI of B − A", "p (test)", `p adjusted (${ADJUST[INDEX.adjust]})`].map((h) => el("th", {}, h))),
      Object.entries(ev.metrics).map(([k, m]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, fmt(m.a)), el("td", { class: "num" }, fmt(m.b)),
        el("td", { class: "num" }, signed(m.diff)), el("td", { class: "num" }, m.ci95 && m.ci95[0] !== null ? `[${signed(m.ci95[0])}, ${signed(m.ci95[1])}]` : "-"),
        el("td", { class: "num" }, m.p === null ? "-" : `${fmtP(m.p)} (${m.test})`), el("td", { class: "num" }, fmtP(m.p_adjusted)))));
    const mc = ev.mcnemar;
    // Per group: its members' right/wrong in A and in B (examples both predicted).
    const rows = [];
    let wins = 0, losses = 0, mixed = 0;
    for (let g = 0; g < da.groups.name.length; g++) {
      const members = da.groups.members[g].filter((i) => posB.has(EA.id[i]));
      let ra = 0, rb = 0, differ = false;
      for (const i of members) {
        const j = posB.get(EA.id[i]);
        const same = da.has_correct ? EA.correct[i] === EB.correct[j] : EA.prediction[i] === EB.prediction[j];
        if (!same) differ = true;
        ra += EA.correct[i] || 0;
        rb += EB.correct[j] || 0;
      }
      if (!differ) continue;
      const verdict = rb > ra ? "B wins" : rb < ra ? "B loses" : "mixed";
      if (rb > ra) wins += 1; else if (rb < ra) losses += 1; else mixed += 1;
      rows.push([g, members, verdict]);
    }
    const state = { only: "", page: 0 };
    const list = el("div", { id: "ab-groups" });
    function draw() {
      const shown = rows.filter((r) => !state.only || r[2] === state.only);
      const page = Math.min(state.page, Math.max(0, Math.ceil(shown.length / PAGE_SIZE) - 1));
      const cards = shown.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE).map(([g, members, verdict]) => {
        const extra = { head: ["A", "A right", "B", "B right"], cells: (i) => {
          const j = posB.get(EA.id[i]);
          const mark = (c) => c === 1 ? "right" : c === 0 ? "wrong" : "-";
          return [el("td", {}, EA.prediction[i] === null ? "(unparsed)" : EA.prediction[i]), el("td", {}, mark(EA.correct[i])),
            el("td", {}, EB.prediction[j] === null ? "(unparsed)" : EB.prediction[j]), el("td", {}, mark(EB.correct[j]))];
        } };
        const view = Object.assign({}, da, { lm_fields: [] });
        return el("div", { class: "group " + (verdict === "B wins" ? "good" : verdict === "B loses" ? "bad" : ""), "data-group": da.groups.name[g] },
          el("h3", {}, `${da.groups.name[g]}: ${verdict}`), memberTable(view, members, () => true, extra));
      });
      fill(list, el("p", {}, "shown: ", el("b", { id: "ab-shown" }, String(shown.length))), pager(shown.length, page, (p) => { state.page = p; draw(); }), ...cards);
    }
    const unit = da.grouped ? "groups" : "examples";
    fill(app, el("h1", {}, `A vs B: ${ev.name}`), el("p", {}, `A = ${a.label}; B = ${b.label}`),
      el("p", {}, `p: two-sided; accuracy by McNemar's exact test (mcnemar), every other metric by the paired bootstrap ` +
        `(${INDEX.bootstrap.resamples} resamples, seed ${INDEX.bootstrap.seed}). Adjusted: ${ADJUST[INDEX.adjust]} over the ${total} p-values of this pair's table (every benchmark A and B share).`),
      stats,
      mc ? el("p", { id: "ab-mcnemar" }, `McNemar: of ${mc.pairs} examples both predicted, ${mc.a_only} right by A only and ${mc.b_only} by B only; exact two-sided p = ${fmtP(mc.p)}.`) : null,
      el("div", { class: "counts" }, el("span", {}, `${unit} where A and B differ: `, el("b", { id: "ab-count" }, String(rows.length))),
        el("span", {}, "B wins: ", el("b", { id: "ab-wins" }, String(wins))), el("span", {}, "B loses: ", el("b", { id: "ab-losses" }, String(losses))),
        el("span", {}, `mixed: ${mixed}`)),
      el("div", { class: "filters" }, el("label", {}, "show ", el("select", { id: "f-verdict", onchange: (e) => { state.only = e.target.value; state.page = 0; draw(); } },
        el("option", { value: "" }, "every difference"), el("option", { value: "B wins" }, "B wins"), el("option", { value: "B loses" }, "B loses"), el("option", { value: "mixed" }, "mixed")))),
      list);
    draw();
  }

  function notFound() { fill(app, el("p", { class: "warn" }, "No such page."), el("a", { href: "#overview" }, "overview")); }

  function route() {
    const parts = (location.hash || "#overview").slice(1).split("/");
    if (parts[0] === "set") setPage(parts[1]);
    else if (parts[0] === "ab") abPage(Number(parts[1]), Number(parts[2]));
    else overview();
    window.scrollTo(0, 0);
  }

  if (!INDEX) { fill(app, el("p", { class: "warn" }, "data/index.js is missing")); return; }
  window.addEventListener("hashchange", route);
  route();
})();
