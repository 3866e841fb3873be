/* evaltrail report: sortable tables, and per-scenario drill-downs loaded on demand.
 *
 * Data files are scripts (data/<scenario>.js), not JSON: fetch() of a file:// URL is blocked in
 * Chromium, a <script> is not. Every data string reaches the page through textContent (never
 * innerHTML), so nothing in a prompt or completion can become markup.
 */
(function () {
  "use strict";

  const INDEX = window.EVALTRAIL_INDEX || { scenarios: [] };
  const PAGE_SIZE = 20;
  const LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";

  /* h("td", {className: "num", text: "0.5"}, [child, ...]): an element, text set safely. */
  function h(tag, props, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === "text") node.textContent = v;
      else if (k === "className") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const c of children || []) {
      if (c !== null && c !== undefined) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return node;
  }

  /* A name that may wrap after "_" or "/" (model and metric names have no spaces). */
  function breakable(name) {
    const frag = document.createDocumentFragment();
    String(name).split(/(?<=[_/])/).forEach((part, i) => {
      if (i) frag.appendChild(document.createElement("wbr"));
      frag.appendChild(document.createTextNode(part));
    });
    return frag;
  }

  /* Scores: integers as such (0/1, token counts); logprobs (fixed=true): always with decimals. */
  function fmt(v, fixed) {
    if (v === null || v === undefined) return "—";
    if (Number.isInteger(v) && !fixed) return String(v);
    return Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(3);
  }

  /* ---- sortable tables: first click sorts numbers high-to-low and text A-Z, next click reverses */
  function sortTable(th) {
    const table = th.closest("table");
    const col = Number(th.dataset.col);
    const numeric = th.dataset.type === "num";
    const current = th.getAttribute("aria-sort");
    const dir = current ? (current === "ascending" ? "descending" : "ascending") : (numeric ? "descending" : "ascending");
    table.querySelectorAll("thead th[data-col]").forEach((x) => x.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", dir);
    const key = (row) => {
      const cell = row.cells[col];
      const v = cell ? cell.dataset.sort : undefined;
      if (v === undefined || v === "") return null;
      return numeric ? parseFloat(v) : v.toLowerCase();
    };
    const sign = dir === "ascending" ? 1 : -1;
    const body = table.tBodies[0];
    const rows = Array.from(body.rows).map((r) => [key(r), r]);
    rows.sort((a, b) => {  // empty cells last either way
      if (a[0] === null || b[0] === null) return (a[0] === null) - (b[0] === null);
      return (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0) * sign;
    });
    rows.forEach(([, r]) => body.appendChild(r));
  }

  document.addEventListener("click", (e) => {
    const th = e.target.closest("table.sortable thead th[data-col]");
    if (th) sortTable(th);
  });
  document.addEventListener("keydown", (e) => {
    const th = e.target.closest && e.target.closest("table.sortable thead th[data-col]");
    if (th && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); sortTable(th); }
  });

  /* ---- loading a scenario's data by inserting its script */
  function loadScenario(name) {
    return new Promise((resolve, reject) => {
      const have = () => window.EVALTRAIL_DATA && window.EVALTRAIL_DATA[name];
      if (have()) return resolve(have());
      const s = document.createElement("script");
      s.src = "data/" + encodeURIComponent(name) + ".js";
      s.onload = () => (have() ? resolve(have()) : reject(new Error(s.src + " did not define the data")));
      s.onerror = () => reject(new Error("could not load " + s.src));
      document.head.appendChild(s);
    });
  }

  /* ---- routing: #scenario/<name> shows that scenario, anything else the overview */
  let shown = null;
  function route() {
    const m = /^#scenario\/(.+)$/.exec(location.hash);
    const name = m ? decodeURIComponent(m[1]) : null;
    const overview = document.getElementById("overview");
    const view = document.getElementById("scenario-view");
    if (name && INDEX.scenarios.includes(name)) {
      overview.hidden = true;
      view.hidden = false;
      if (shown === name) return;
      shown = name;
      view.replaceChildren(h("p", { text: "Loading " + name + "…" }));
      loadScenario(name).then(
        (data) => { if (shown === name) renderScenario(view, data); },
        (err) => { if (shown === name) view.replaceChildren(h("p", { className: "error", text: err.message })); });
      window.scrollTo(0, 0);
    } else {
      shown = null;
      overview.hidden = false;
      view.hidden = true;
      view.replaceChildren();
    }
  }
  window.addEventListener("hashchange", route);
  route();  // the script is deferred: the document is parsed by now

  /* ---- scenario view */
  function factsList(pairs) {
    const dl = h("dl", { className: "facts" });
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === "" || (Array.isArray(v) && !v.length)) continue;
      dl.append(h("dt", { text: k }), h("dd", { text: Array.isArray(v) ? v.join(", ") : String(v) }));
    }
    return dl;
  }

  function sourcesTable(sources) {
    const origin = (s) => s.url || [s.package && s.package + (s.version ? "==" + s.version : ""), s.path].filter(Boolean).join(" : ");
    return h("table", { className: "sources" }, [
      h("thead", {}, [h("tr", {}, ["file", "kind", "origin", "licence", "bytes", "sha256"].map((t) => h("th", { text: t })))]),
      h("tbody", {}, (sources || []).map((s) => h("tr", {}, [
        h("td", { text: s.file || "" }), h("td", { text: s.kind || "" }), h("td", { text: origin(s) }),
        h("td", { text: s.license || "" }), h("td", { className: "num", text: s.bytes == null ? "" : String(s.bytes) }),
        h("td", {}, [h("code", { text: s.sha256 || "" })]),
      ]))),
    ]);
  }

  function renderScenario(view, data) {
    const taxonomy = Object.keys(data.taxonomy || {}).sort().map((k) => [k, data.taxonomy[k]]);
    view.replaceChildren(
      h("p", {}, [h("a", { href: "#", text: "← Leaderboard" })]),
      h("h2", { id: "scenario-title", text: data.scenario }),
      data.description ? h("p", { className: "description", text: data.description }) : null,
      factsList([...taxonomy, ["licence", data.license], ["citation", data.citation], ["method", data.method],
        ["eval split", data.eval_split], ["in-context examples", data.num_shots], ["main metric", data.main_metric],
        ["metrics", data.metrics], ["perturbations", data.perturbations], ["calibration prompt", data.calibration_prompt]]),
      h("details", { className: "sources", ...((data.sources || []).length <= 8 ? { open: "" } : {}) }, [
        h("summary", {}, [h("h3", { text: `Sources (${(data.sources || []).length} pinned files)` })]),
        sourcesTable(data.sources)]),
      h("h3", { text: "Instances" }),
      drilldown(data));
  }

  /* Search text of a group, built once: ids, metadata, prompts, references, outputs. */
  function haystack(group) {
    if (group._text === undefined) {
      const parts = [group.original_id];
      for (const it of group.items) {
        parts.push(it.id, it.perturbation || "", it.prompt, ...it.references, ...Object.values(it.metadata || {}).map(String));
        for (const o of it.options || []) parts.push(o[0], o[1]);
        for (const out of it.outputs) if (out.text) parts.push(out.text);
      }
      Object.defineProperty(group, "_text", { value: parts.join("\n").toLowerCase() });
    }
    return group._text;
  }

  function drilldown(data) {
    const mainIdx = data.score_metrics.indexOf(data.main_metric);
    const canFilter = !!data.filterable && mainIdx >= 0;
    const state = { model: 0, filter: "all", query: "", page: 0 };
    const groups = data.groups;

    const modelSel = h("select", { id: "filter-model", "aria-label": "model for the filter" },
      data.models.map((m, i) => h("option", { value: String(i), text: m })));
    const filterSel = h("select", { id: "filter-correct", "aria-label": "filter by correctness" }, [
      h("option", { value: "all", text: "all" }),
      h("option", { value: "correct", text: "correct" }),
      h("option", { value: "incorrect", text: "incorrect" })]);
    if (!canFilter) { filterSel.disabled = true; modelSel.disabled = true; }
    const search = h("input", { type: "search", id: "filter-text", placeholder: "search prompts, references, outputs…" });
    const count = h("span", { id: "instance-count", "aria-live": "polite" });
    const list = h("div", { className: "groups", id: "groups" });
    const pager = h("div", { className: "pager" });

    const correct = (g) => {
      const v = g.items[0].outputs[state.model].scores[mainIdx];
      return v === null || v === undefined ? null : v >= 0.5;
    };
    const matching = () => {
      const q = state.query.trim().toLowerCase();
      return groups.filter((g) => {
        if (canFilter && state.filter !== "all") {
          const c = correct(g);
          if (c === null || c !== (state.filter === "correct")) return false;
        }
        return !q || haystack(g).includes(q);
      });
    };

    function render() {
      const shownGroups = matching();
      const pages = Math.max(1, Math.ceil(shownGroups.length / PAGE_SIZE));
      state.page = Math.min(state.page, pages - 1);
      const start = state.page * PAGE_SIZE;
      const page = shownGroups.slice(start, start + PAGE_SIZE);
      count.dataset.matching = String(shownGroups.length);
      count.textContent = shownGroups.length
        ? `showing ${start + 1}–${start + page.length} of ${shownGroups.length} instances (${groups.length} in all)`
        : `no instance matches (${groups.length} in all)`;
      list.replaceChildren(...page.map((g) => groupView(data, g, mainIdx)));
      const go = (d) => () => { state.page += d; render(); list.scrollIntoView(); };
      pager.replaceChildren(
        h("button", { type: "button", className: "prev", onclick: go(-1), ...(state.page === 0 ? { disabled: "" } : {}) }, ["← previous"]),
        h("span", { text: `page ${state.page + 1} of ${pages}` }),
        h("button", { type: "button", className: "next", onclick: go(1), ...(state.page >= pages - 1 ? { disabled: "" } : {}) }, ["next →"]));
    }
    const reset = (fn) => (e) => { fn(e.target.value); state.page = 0; render(); };
    modelSel.addEventListener("change", reset((v) => { state.model = Number(v); }));
    filterSel.addEventListener("change", reset((v) => { state.filter = v; }));
    search.addEventListener("input", reset((v) => { state.query = v; }));
    render();

    const note = canFilter
      ? `correct / incorrect: the original instance's ${data.main_metric} for the chosen model (≥ 0.5 counts as correct)`
      : "this scenario's main metric is not a 0/1 accuracy: no correct / incorrect filter";
    return h("div", { className: "drilldown" }, [
      h("div", { className: "controls" }, [
        h("label", {}, ["model ", modelSel]), h("label", {}, ["show ", filterSel]),
        h("label", {}, ["search ", search]), count]),
      h("p", { className: "note", text: note }),
      list, pager]);
  }

  function groupView(data, g, mainIdx) {
    const head = g.items[0];
    const meta = Object.keys(head.metadata || {}).sort().map((k) => `${k}: ${head.metadata[k]}`).join(" · ");
    return h("article", { className: "group", "data-original": g.original_id }, [
      h("header", {}, [h("strong", { text: "instance " + g.original_id }),
        g.trial ? h("span", { className: "meta", text: "trial " + g.trial }) : null,
        h("span", { className: "meta", text: meta })]),
      h("div", { className: "variants" }, g.items.map((it) => itemView(data, it, mainIdx)))]);
  }

  function itemView(data, it, mainIdx) {
    const joint = data.method === "multiple_choice_joint";
    const label = (i) => (joint ? LETTERS[i] : String(i + 1));
    const kids = [h("h4", {}, [
      h("span", { className: it.perturbation ? "tag variant" : "tag", text: it.perturbation || "original" }),
      h("span", { className: "id", text: it.id })])];

    // The prompt exactly as sent: the shared context (collapsed) followed by the rest.
    kids.push(h("div", { className: "label", text: "prompt" }));
    if (it.context !== undefined) {
      const ctx = data.contexts[it.context];
      kids.push(h("details", { className: "context" }, [
        h("summary", { text: `shared context (${ctx.length} characters, the same for every instance with these in-context examples)` }),
        h("pre", { text: ctx })]));
    }
    kids.push(h("pre", { className: "prompt", text: it.prompt }));

    // References / options, with each model's logprob and choice.
    const withLp = data.models.map((m, i) => i).filter((i) => it.outputs[i].logprobs);
    const optHead = [h("th", { text: joint ? "" : "#" }), h("th", { text: it.options ? "option: prompt + continuation" : "reference" }),
      ...withLp.map((i) => h("th", {}, [breakable(data.models[i])]))];
    const optRows = it.references.map((ref, r) => {
      const gold = it.gold.includes(r);
      const text = it.options
        ? h("td", {}, [it.options[r][0], h("span", { className: "cont", text: it.options[r][1] })])
        : h("td", { text: ref });
      return h("tr", { className: gold ? "gold" : null }, [
        h("td", { className: "mark", text: label(r) + (gold ? " ✓" : "") }), text,
        ...withLp.map((i) => {
          const out = it.outputs[i];
          const cal = out.calibration_logprobs ? ` (calib. ${fmt(out.calibration_logprobs[r], true)})` : "";
          return h("td", { className: "num" + (out.pick === r ? " chosen" : ""), text: fmt(out.logprobs[r], true) + cal });
        })]);
    });
    const lpNote = withLp.length ? (joint ? "; per model: logprob of the letter, ◀ its answer" : `; per model: logprob of the continuation, ◀ its choice: ${data.choice_rule || "highest logprob"}`) : "";
    kids.push(h("div", { className: "label", text: "references (✓ correct" + lpNote + ")" }),
      h("table", { className: "options" }, [h("thead", {}, [h("tr", {}, optHead)]), h("tbody", {}, optRows)]));

    // Each model's output: the completion text exactly (quoted, escapes visible) and the option it picked.
    const outRows = data.models.map((m, i) => {
      const out = it.outputs[i];
      const ok = mainIdx >= 0 ? out.scores[mainIdx] : null;
      const answer = [];
      if (out.text !== undefined) answer.push(h("code", { text: JSON.stringify(out.text) }));
      if (out.logprob !== undefined) answer.push("logprob " + fmt(out.logprob, true));
      if (out.pick !== undefined) {
        const ref = it.references[out.pick];
        answer.push((answer.length ? " → " : "") + label(out.pick) + ". " + (ref.length > 80 ? ref.slice(0, 79) + "…" : ref));
      }
      return h("tr", {}, [h("th", { scope: "row" }, [breakable(m)]), h("td", { className: "answer" }, answer.length ? answer : ["—"]),
        h("td", { className: "num " + (ok === null || ok === undefined ? "" : ok >= 0.5 ? "ok" : "wrong"), text: fmt(ok) })]);
    });
    kids.push(h("div", { className: "label", text: "outputs" }), h("table", { className: "outputs" }, [
      h("thead", {}, [h("tr", {}, [h("th", { text: "model" }), h("th", { text: "answer" }), h("th", {}, [breakable(data.main_metric || "main")])])]),
      h("tbody", {}, outRows)]));
    for (const [i, m] of data.models.entries()) {
      if (it.outputs[i].rendered_prompt) {
        kids.push(h("details", { className: "rendered" }, [h("summary", { text: `prompt as ${m}'s chat template rendered it (what was sent)` }),
          h("pre", { className: "text", text: it.outputs[i].rendered_prompt })]));
      }
    }

    // Every per-instance metric, one row each (rows no model has a value for are left out).
    const scoreRows = data.score_metrics.map((name, k) => [name, k])
      .filter(([, k]) => it.outputs.some((o) => o.scores[k] !== null && o.scores[k] !== undefined))
      .map(([name, k]) => h("tr", { className: k === mainIdx ? "main" : null }, [h("th", { scope: "row" }, [breakable(name)]),
        ...it.outputs.map((o) => h("td", { className: "num", text: fmt(o.scores[k]) }))]));
    kids.push(h("div", { className: "label", text: "scores" }), h("table", { className: "scores" }, [
      h("thead", {}, [h("tr", {}, [h("th", { text: "metric" }), ...data.models.map((m) => h("th", {}, [breakable(m)]))])]),
      h("tbody", {}, scoreRows)]));
    return h("section", { className: "item" + (it.perturbation ? " variant" : " original"), "data-id": it.id }, kids);
  }
})();
