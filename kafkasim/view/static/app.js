// kafkasim live view: draws each snapshot the server sends on /events (docs/view.md).
// Plain JS, no build step. Everything drawn comes from the snapshot; nothing is computed
// here except layout. Partition cells carry data-partition / data-records / data-owner so
// tests and people can read the numbers from the DOM.
"use strict";

const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const UNOWNED = "#d9d9d9";
const SVG_NS = "http://www.w3.org/2000/svg";
const TOP = 40;
let ROW = 38;                     // row pitch; 20 when a topic has many partitions
const X = { prod: 10, prodW: 210, route: 270, routeW: 170, part: 490, partW: 330, mem: 880, memW: 230 };

let snapshot = null;
let lastGeneration = {};          // group -> generation seen, to flash on a new one

function leadership(p) {
  if (p.leader === -1) return `OFFLINE · replicas ${p.replicas.join(",")}`;
  return `leader ${p.leader == null ? "–" : p.leader} · isr ${p.isr.join(",") || "–"}` +
    (p.replicas.length > 1 ? ` of ${p.replicas.join(",")}` : "");
}

function fit(text, n) { return text.length <= n ? text : text.slice(0, n - 1) + "…"; }

function colorOf(index) { return index == null ? UNOWNED : PALETTE[index % PALETTE.length]; }

function el(name, attrs, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function h(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function fillSelect(select, values, preferred) {
  const current = select.value;
  const keep = values.includes(current) ? current : (values.includes(preferred) ? preferred : values[0]);
  select.replaceChildren(...values.map(v => { const o = h("option", v); o.value = v; return o; }));
  if (keep !== undefined) select.value = keep;
  return keep;
}

function chosenTopic(s) {
  const names = s.topics.map(t => t.name);
  const busiest = s.topics.slice().sort((a, b) => b.records - a.records)[0];
  return fillSelect(document.getElementById("topic"), names, busiest && busiest.name);
}

function chosenGroup(s, topic) {
  const owning = s.groups.filter(g => g.members.some(m => m.assignment.some(tp => tp[0] === topic)));
  const names = s.groups.map(g => g.group_id);
  const select = document.getElementById("group");
  select.parentElement.hidden = names.length === 0;
  const pick = fillSelect(select, names, owning.length ? owning[0].group_id : names[0]);
  return s.groups.find(g => g.group_id === pick) || null;
}

function drawBrokers(s) {
  const strip = document.getElementById("brokers");
  strip.replaceChildren(...s.brokers.map(b => {
    const d = h("div", "", "broker " + b.state.replace(/\s+/g, "-"));
    d.dataset.broker = b.id;
    d.textContent = `broker ${b.id} · rack ${b.rack == null ? "–" : b.rack} · ${b.state}` +
      (b.listener ? ` at ${b.listener}` : "");
    return d;
  }));
}

function drawDiagram(s, topic, group) {
  const svg = document.getElementById("diagram");
  const t = s.topics.find(x => x.name === topic);
  const parts = t ? t.partition_stats : [];
  const producers = s.producers.filter(p => Object.keys(p.by_partition).some(k => k.startsWith(topic + "-")));
  const members = group ? group.members : [];
  const owner = {};
  for (const m of members) for (const [tt, p] of m.assignment) if (tt === topic) owner[p] = m;
  const lag = {};                   // the selected group's lag per partition, from its commits
  for (const c of group ? group.committed : []) if (c.topic === topic) lag[c.partition] = c.lag;
  const lagText = p => (p in lag && lag[p] != null) ? ` · lag ${lag[p]}` : "";
  ROW = parts.length > 16 ? 22 : 38;
  const compact = ROW < 38;
  const cellH = compact ? 18 : 30;
  const span = Math.max(parts.length * ROW, producers.length * 38, members.length * 57, 3 * 38);
  const height = TOP + span + 20;
  svg.setAttribute("height", height);
  const nodes = [];
  nodes.push(el("text", { x: X.prod, y: 20, class: "title" }, "producers"));
  nodes.push(el("text", { x: X.route, y: 20, class: "title" }, "routing"));
  nodes.push(el("text", { x: X.part, y: 20, class: "title" }, `${topic || "no topic yet"}: partitions`));
  nodes.push(el("text", { x: X.mem, y: 20, class: "title" },
                group ? `group ${group.group_id} · generation ${group.generation}` : "no consumer group"));
  // routing box in the middle of the height
  const routeY = TOP + span / 2 - 30;
  const n = t ? t.partitions : 0;
  nodes.push(el("rect", { x: X.route, y: routeY, width: X.routeW, height: 60, rx: 8, class: "route" }));
  nodes.push(el("text", { x: X.route + 10, y: routeY + 25, class: "title" }, `murmur2(key) mod ${n}`));
  nodes.push(el("text", { x: X.route + 10, y: routeY + 44, class: "small" }, "Kafka's default partitioner"));
  const latest = s.recent.find(r => r.topic === topic);
  if (!producers.length)
    nodes.push(el("text", { x: X.prod, y: TOP + 15, class: "small" }, "no records in this topic yet"));
  producers.forEach((p, i) => {
    const y = TOP + i * 38;
    const hot = latest && latest.producer === p.id;
    nodes.push(el("path", { d: `M${X.prod + X.prodW},${y + 15} C${X.route - 20},${y + 15} ${X.prod + X.prodW + 20},${routeY + 30} ${X.route},${routeY + 30}`,
                            class: hot ? "link hot" : "link" }));
    const g = el("g", { "data-producer": p.id });
    g.append(el("rect", { x: X.prod, y, width: X.prodW, height: 30, rx: 5, class: "box" }));
    g.append(el("title", {}, `${p.id}: ` + Object.entries(p.by_partition).map(([k, v]) => `${k} ${v}`).join(", ")));
    g.append(el("text", { x: X.prod + 8, y: y + 13 }, fit(p.id, 30)));
    const count = Object.entries(p.by_partition).filter(([k]) => k.startsWith(topic + "-"))
      .reduce((a, [, v]) => a + v, 0);
    g.append(el("text", { x: X.prod + 8, y: y + 26, class: "small" },
                `${count} record${count === 1 ? "" : "s"}` + (p.producer_id != null ? ` · producer id ${p.producer_id}` : "")));
    nodes.push(g);
  });
  parts.forEach((p, i) => {
    const y = TOP + i * ROW;
    const m = owner[p.partition];
    const hot = latest && latest.partition === p.partition;
    nodes.push(el("path", { d: `M${X.route + X.routeW},${routeY + 30} C${X.part - 20},${routeY + 30} ${X.route + X.routeW + 20},${y + cellH / 2} ${X.part},${y + cellH / 2}`,
                            class: hot ? "link hot" : "link" }));
    const g = el("g", { "data-partition": `${topic}-${p.partition}`, "data-records": p.records,
                        "data-leo": p.log_end_offset, "data-owner": m ? m.label : "",
                        "data-owner-color": colorOf(m ? m.color : null) });
    const fill = colorOf(m ? m.color : null);
    g.append(el("rect", { x: X.part, y, width: X.partW, height: cellH, rx: 4, fill, "fill-opacity": 0.28,
                          stroke: p.leader === -1 ? "#e15759" : fill, "stroke-width": p.leader === -1 ? 3 : 1 }));
    g.append(el("rect", { x: X.part, y, width: 16, height: cellH, fill, class: "owner-bar" }));
    const recs = `${p.records} record${p.records === 1 ? "" : "s"}`;
    if (compact) {
      g.append(el("text", { x: X.part + 24, y: y + cellH - 2, class: "count" },
                  `P${p.partition} · ${recs} · LEO ${p.log_end_offset}${lagText(p.partition)} · ${p.rate.toFixed(1)} rec/s · ` +
                  leadership(p)));
      g.lastChild.setAttribute("y", y + cellH - 5);
    } else {
      g.append(el("text", { x: X.part + 24, y: y + 13, class: "title" }, `P${p.partition}`));
      g.append(el("text", { x: X.part + 60, y: y + 13, class: "count" }, recs));
      g.append(el("text", { x: X.part + 24, y: y + 26, class: "small" },
                  `LEO ${p.log_end_offset}${lagText(p.partition)} · ${p.rate.toFixed(1)} rec/s · ` + leadership(p)));
    }
    g.append(el("title", {}, `${topic}-${p.partition}: ${recs}, log ${p.log_start_offset}..${p.log_end_offset}, ` +
                             `${p.segments} segment(s), owner ${m ? m.label : "none"}`));
    nodes.push(g);
    if (m) {
      const j = members.indexOf(m);
      nodes.push(el("path", { d: `M${X.part + X.partW},${y + cellH / 2} C${X.mem - 30},${y + 15} ${X.part + X.partW + 30},${TOP + j * 57 + 20} ${X.mem},${TOP + j * 57 + 20}`,
                              class: "own", stroke: colorOf(m.color) }));
    }
  });
  members.forEach((m, j) => {
    const y = TOP + j * 57;
    const owned = m.assignment.filter(tp => tp[0] === topic).map(tp => "P" + tp[1]);
    const g = el("g", { "data-member": m.member_id, "data-color": colorOf(m.color) });
    g.append(el("rect", { x: X.mem, y, width: X.memW, height: 48, rx: 6, fill: colorOf(m.color), "fill-opacity": 0.35,
                          stroke: colorOf(m.color) }));
    g.append(el("text", { x: X.mem + 8, y: y + 15, class: "title" }, fit(m.label, 30)));
    g.append(el("title", {}, `${m.label}: member id ${m.member_id}` +
                             (m.group_instance_id ? `, static instance ${m.group_instance_id}` : "")));
    g.append(el("text", { x: X.mem + 8, y: y + 30, class: "small" }, `host ${m.client_host || "in-process"}`));
    g.append(el("text", { x: X.mem + 8, y: y + 43, class: "small" }, fit(`owns ${owned.join(", ") || "nothing"}`, 40)));
    nodes.push(g);
  });
  svg.replaceChildren(...nodes);
  return t;
}

function drawRecent(s) {
  const body = document.querySelector("#recent tbody");
  body.replaceChildren(...s.recent.slice(0, 15).map(r => {
    const tr = h("tr");
    const routed = r.hash_partition == null ? "null key: not hashed" : String(r.hash_partition);
    if (r.hash_partition != null && r.hash_partition !== r.partition) tr.className = "mismatch";
    for (const v of [r.topic, r.offset, r.key == null ? "null" : r.key, routed, r.partition, r.producer])
      tr.append(h("td", String(v)));
    return tr;
  }));
}

function drawRebalances(s, group) {
  const list = document.getElementById("rebalances");
  list.replaceChildren(...s.rebalances.map(r => {
    const li = h("li");
    const byPair = new Map();      // "from → to" -> partitions, so each hand-over is one phrase
    for (const x of r.moved) {
      const pair = `${x.from || "no owner"} → ${x.to || "no owner"}`;
      byPair.set(pair, (byPair.get(pair) || []).concat(`${x.topic}-${x.partition}`));
    }
    const moved = [...byPair].map(([pair, tps]) => `${tps.join(", ")}: ${pair}`);
    li.textContent = `${new Date(r.timestamp).toLocaleTimeString()}: ` +
      `${r.group} generation ${r.generation} (${r.protocol || "no protocol"}, ` +
      `${r.members.length} member${r.members.length === 1 ? "" : "s"})` +
      (r.joined.length ? `; joined ${r.joined.join(", ")}` : "") +
      (r.left.length ? `; left ${r.left.join(", ")}` : "") +
      (moved.length ? `; moved ${moved.join("; ")}` : "; no partition moved");
    li.dataset.group = r.group;
    li.dataset.generation = r.generation;
    return li;
  }));
  for (const g of s.groups) {
    const before = lastGeneration[g.group_id];
    if (before !== undefined && before !== g.generation) {
      const first = list.querySelector(`li[data-group="${CSS.escape(g.group_id)}"]`);
      if (first) first.classList.add("flash");
      if (group && group.group_id === g.group_id) {
        const svg = document.getElementById("diagram");
        svg.classList.remove("flash"); void svg.getBBox(); svg.classList.add("flash");
      }
    }
    lastGeneration[g.group_id] = g.generation;
  }
}

function drawClusterEvents(s) {
  const list = document.getElementById("cluster-events");
  list.parentElement.hidden = s.cluster_events.length === 0;
  list.replaceChildren(...s.cluster_events.map(e => {
    const when = new Date(e.at_ms).toLocaleTimeString();
    const li = h("li", e.kind === "broker"
      ? `${when}: broker ${e.broker} ${e.from || "unknown"} → ${e.to || "gone"}`
      : `${when}: ${e.topic}-${e.partition} leader ${e.from} → ${e.to === -1 ? "none (offline)" : e.to}`);
    return li;
  }));
}

function render(s) {
  snapshot = s;
  document.getElementById("datadir").textContent = s.data_dir + (s.behind ? " (catching up…)" : "");
  drawBrokers(s);
  const topic = chosenTopic(s);
  const group = chosenGroup(s, topic);
  const t = drawDiagram(s, topic, group);
  drawRecent(s);
  drawRebalances(s, group);
  drawClusterEvents(s);
  document.getElementById("summary").textContent = t
    ? `${t.partitions} partitions · ${t.records} record${t.records === 1 ? "" : "s"} · ${s.producers.length} producer(s) · ` +
      `${group ? group.members.length : 0} member(s)` : "";
  const box = document.getElementById("problems-box");
  box.hidden = s.problems.length === 0;
  document.getElementById("problems").replaceChildren(...s.problems.map(p => h("li", p)));
  document.body.dataset.poll = s.poll;
}

function connect() {
  const status = document.getElementById("status");
  const source = new EventSource("/events");
  source.addEventListener("snapshot", ev => {
    status.textContent = "live"; status.className = "status live";
    render(JSON.parse(ev.data));
  });
  source.onerror = () => { status.textContent = "reconnecting…"; status.className = "status lost"; };
}

for (const id of ["topic", "group"])
  document.getElementById(id).addEventListener("change", () => snapshot && render(snapshot));
connect();
