// kafkasim live view: draws each snapshot the server sends on /events (docs/view.md).
// Plain JS, no build step. Everything drawn comes from the snapshot; nothing is computed
// here except layout. Cells carry data-* attributes (data-partition, data-records,
// data-owner, data-broker, data-rack, data-role, data-position, ...) so tests and people
// can read the numbers from the DOM.
"use strict";

const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const UNOWNED = "#d9d9d9";
const SVG_NS = "http://www.w3.org/2000/svg";
const TOP = 40;
let ROW = 38;                     // row pitch; 22 when a topic has many partitions
const X = { prod: 10, prodW: 210, route: 270, routeW: 170, part: 490, partW: 330, mem: 880, memW: 260 };
const MAX_FLOWS = 12;             // records animated per snapshot at most

let snapshot = null;
let lastGeneration = {};          // group -> generation seen, to flash on a new one
const picked = { topic: null, group: null };   // what the user chose; else the page follows the active ones
let seenRecords = null;           // "topic-partition-offset" of records already animated
let geometry = null;              // where the last drawing put producers, the router and partitions
const FLASH_MS = 1800;            // a fault's red flash (style.css: @keyframes faultflash)
const faultSeen = {};             // "topic-partition" / "broker-<id>" -> newest fault time already flashed
const brokerFlash = {};           // broker id -> performance.now() its flash began (boxes are redrawn)
const brokerFaultText = {};       // broker id -> its fault state as last drawn, to flash on a change

function leadership(p) {
  if (p.leader === -1) return `OFFLINE · replicas ${p.replicas.join(",")}`;
  return `leader ${p.leader == null ? "–" : p.leader} · isr ${p.isr.join(",") || "–"}` +
    (p.replicas.length > 1 ? ` of ${p.replicas.join(",")}` : "");
}

// The offsets a read_committed consumer may read up to: the LSO, shown beside the high watermark
// when a transaction holds it back (LSO < HW), and the HW beside the LEO when followers lag.
function offsets(p) {
  let text = p.high_watermark === p.log_end_offset ? `LEO = HW ${p.log_end_offset}`
    : `LEO ${p.log_end_offset} · HW ${p.high_watermark}`;
  text += p.last_stable_offset < p.high_watermark ? ` · LSO ${p.last_stable_offset} (open txn)` : ` · LSO ${p.last_stable_offset}`;
  return text;
}

function duration(s, ms) {
  if (ms == null) return "–";
  const text = ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60000)} min ${Math.round(ms % 60000 / 1000)} s`;
  return s.clock && s.clock.simulated ? `${text} (simulated)` : text;
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

// A time from the data: wall-clock, or labelled simulated (a lab's MockClock starts in 2023).
function when(s, ms) {
  if (ms == null) return "–";
  const d = new Date(ms);
  return s.clock && s.clock.simulated ? `simulated ${d.toISOString().slice(11, 23)}` : d.toLocaleTimeString();
}

function fillSelect(select, values, wanted) {
  const keep = values.includes(wanted) ? wanted : values[0];
  select.replaceChildren(...values.map(v => { const o = h("option", v); o.value = v; return o; }));
  if (keep !== undefined) select.value = keep;
  return keep;
}

function chosenTopic(s) {
  const names = s.topics.map(t => t.name);
  const wanted = picked.topic && names.includes(picked.topic) ? picked.topic : s.active.topic;
  return fillSelect(document.getElementById("topic"), names, wanted);
}

function chosenGroup(s) {
  const names = s.groups.map(g => g.group_id);
  const select = document.getElementById("group");
  select.parentElement.hidden = names.length === 0;
  const wanted = picked.group && names.includes(picked.group) ? picked.group : s.active.group;
  const pick = fillSelect(select, names, wanted);
  for (const o of select.options) {        // the group's type, as ListGroups names it
    const g = s.groups.find(x => x.group_id === o.value);
    if (g && g.type) o.textContent = `${o.value} (${g.type})`;
  }
  return s.groups.find(g => g.group_id === pick) || null;
}

// A consumer group (KIP-848) reconciling: per partition of the topic, the member giving it up
// (pending revocation, with the member whose target has it) and the member waiting for it
// (pending assignment, with the member that still owns it, or none: its next heartbeat takes it).
function reconciling(group, topic) {
  const revoking = {}, waiting = {};
  if (!group || group.type !== "consumer") return { revoking, waiting };
  for (const m of group.members) {
    for (const x of m.pending_revocation) if (x.topic === topic) revoking[x.partition] = { member: m, to: x.to };
    for (const x of m.pending_assignment) if (x.topic === topic) waiting[x.partition] = { member: m, from: x.from };
  }
  return { revoking, waiting };
}

// Diagonal stripes in a member's colour: a partition its owner is giving up.
function stripes(defs, index) {
  const id = `stripes-${index % PALETTE.length}`;
  if (!defs.querySelector(`#${id}`)) {
    const p = el("pattern", { id, width: 10, height: 10, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    p.append(el("rect", { width: 10, height: 10, fill: "#ffffff" }));
    p.append(el("rect", { width: 5, height: 10, fill: colorOf(index), "fill-opacity": 0.55 }));
    defs.append(p);
  }
  return `url(#${id})`;
}

// A share group (KIP-932): each partition's share-partition state (SPSO, in-flight records and
// their states, redeliveries) and the members fetching from it, several per partition.
function sharing(group, topic) {
  const fetchers = {}, state = {};
  if (!group || group.type !== "share") return { fetchers, state };
  for (const m of group.members) for (const [tt, p] of m.assignment) if (tt === topic) (fetchers[p] = fetchers[p] || []).push(m);
  for (const x of group.share_partitions) if (x.topic === topic) state[x.partition] = x;
  return { fetchers, state };
}

function inFlightText(x) {
  if (!x || !x.initialized) return "not fetched yet";
  return `in flight ${x.in_flight} · redeliveries ${x.redeliveries}`;
}

function inFlightDetail(x) {
  if (!x || !x.initialized) return "no share-partition state in __share_group_state yet";
  return `SPSO ${x.start_offset}` + (x.end_offset == null ? "" : ` · SPEO ${x.end_offset}`) +
    ` · ${x.in_flight} in flight: ${x.delivered} delivered (acquired, or released for redelivery), ` +
    `${x.available} never delivered, ${x.acknowledged} acknowledged, ${x.archived} archived · ` +
    `${x.redelivered} in flight delivered twice or more · ${x.redeliveries} redeliveries, ` +
    `${x.archived_at_limit} archived at the delivery limit, seen by the view`;
}

function groupTitle(group) {
  if (!group) return ["no consumer group", ""];
  if (group.type === "share")
    return [`share group ${group.group_id} · ${group.state}`,
            `share · ${group.protocol} · epoch ${group.group_epoch} (target ${group.assignment_epoch})`];
  if (group.type === "consumer")
    return [`group ${group.group_id} · ${group.state}`,
            `consumer protocol · ${group.protocol} · epoch ${group.group_epoch} (target ${group.assignment_epoch})`];
  return [`group ${group.group_id} · generation ${group.generation}`, "classic"];
}

// Brokers as boxes grouped by rack, each with the replicas it holds of the selected topic.
function drawBrokers(s, topic) {
  const racks = new Map();
  for (const b of s.brokers) {
    const rack = b.rack == null ? "no rack" : `rack ${b.rack}`;
    racks.set(rack, (racks.get(rack) || []).concat(b));
  }
  const strip = document.getElementById("brokers");
  strip.replaceChildren(...[...racks].map(([rack, brokers]) => {
    const box = h("div", undefined, "rack");
    box.dataset.rack = rack;
    box.append(h("div", rack, "rack-name"));
    for (const b of brokers) {
      const d = h("div", undefined, "broker " + b.state.replace(/\s+/g, "-"));
      d.dataset.broker = b.id;
      d.dataset.state = b.state;
      d.dataset.listener = b.listener || "";
      d.append(h("div", `broker ${b.id}`, "broker-name"));
      let where;
      if (!b.serving) where = b.state === "not running" ? "not running (no kafkasim serve)" : `${b.state} · not served`;
      else if (b.port_open) where = `${b.state} · ${b.listener}`;
      else where = `${b.state} · ${b.listener} closed`;
      d.append(h("div", where, "broker-state"));
      const states = brokerFaults(b);
      const events = (s.faults ? s.faults.brokers : []).find(f => f.broker === b.id);
      d.dataset.faultState = states.join(", ");
      if (states.length) { d.classList.add("faulty"); d.append(h("div", states.join(" · "), "fault-state")); }
      if (events) {
        const label = h("div", events.labels.join(" · "), "fault-label");
        label.title = `injected in the last ${s.faults.window_ms / 1000} s: ${events.count} fault(s) on ` +
                      `${events.apis.join(", ")} requests to broker ${b.id}`;
        d.append(label);
      }
      const text = states.join(",");
      if ((events && events.last_ms > (faultSeen[`broker-${b.id}`] || 0)) || (text && text !== brokerFaultText[b.id]))
        brokerFlash[b.id] = performance.now();
      if (events) faultSeen[`broker-${b.id}`] = Math.max(events.last_ms, faultSeen[`broker-${b.id}`] || 0);
      brokerFaultText[b.id] = text;
      flashing(d, brokerFlash[b.id]);
      const mine = b.replicas.filter(r => r.topic === topic);
      const chips = h("div", undefined, "chips");
      for (const r of mine) {
        const c = h("span", `P${r.partition}${r.role === "leader" ? " ★" : ""}`, "chip " + r.role);
        c.dataset.replica = `${r.topic}-${r.partition}`;
        c.dataset.role = r.role;
        c.title = `${r.topic}-${r.partition}: ${r.role === "out-of-sync" ? "follower out of the ISR" : r.role}`;
        chips.append(c);
      }
      if (!mine.length) chips.append(h("span", "no replica of this topic", "muted"));
      d.append(chips);
      const others = b.replicas.length - mine.length;
      if (others) d.append(h("div", `+ ${others} replica${others === 1 ? "" : "s"} of other topics`, "muted small"));
      box.append(d);
    }
    return box;
  }));
}

// A broker's fault state from meta/cluster.json: disk full, log dir offline, isolated, slowed.
function brokerFaults(b) {
  const out = [];
  if (b.disk_full) out.push("disk full");
  if (b.log_dir_offline) out.push("log dir offline");
  if (b.isolated_from) out.push(`isolated from ${b.isolated_from === "both" ? "clients and peers" : b.isolated_from}`);
  if (b.slow_ms) out.push(`slow follower: fetches every ${b.slow_ms} ms`);
  return out;
}

// A red flash that survives redraws: an element drawn again while its flash runs resumes it
// where it was (a negative animation-delay), so a snapshot arriving mid-flash does not restart it.
function flashing(e, startedAt) {
  const elapsed = performance.now() - startedAt;
  if (startedAt == null || elapsed >= FLASH_MS) return;
  e.classList.add("fault-flash");
  e.style.animationDelay = `-${Math.round(elapsed)}ms`;
}

function producerNote(p) {
  if (p.client_id) return p.producer_id != null ? `producer id ${p.producer_id}` : "client id from the record header";
  if (p.producer_id != null) return `no client id in the log · producer id ${p.producer_id}`;
  return "no client id or producer id in the log";
}

function memberLines(m, topic, group) {
  if (group && group.type === "share")         // a share group member: the share-partitions it fetches from
    return m.partitions.filter(x => x.topic === topic).map(x => `P${x.partition}: ` + (x.initialized
      ? `SPSO ${x.start_offset} · in flight ${x.in_flight} · redelivered ${x.redelivered}` : "not fetched yet"));
  return m.partitions.filter(x => x.topic === topic).map(x =>
    `P${x.partition}: position ${x.position == null ? "?" : x.position} · committed ` +
    `${x.committed == null ? "–" : x.committed}` + (x.lag == null ? "" : ` · lag ${x.lag}`));
}

function short(label) { return label ? label.split(" ")[0] : "?"; }

// A consumer group member's reconciliation, one line each: its epoch against the group's, what
// it is giving up and what it waits for.
function memberReconciliation(m, group, topic) {
  if (group && group.type === "share") {
    const others = m.assignment.filter(([tt]) => tt === topic).map(([, p]) => p);
    return [`epoch ${m.member_epoch} / group epoch ${group.group_epoch}` +
            (others.length ? ` · fetches ${others.map(p => "P" + p).join(", ")}` : "")];
  }
  if (!group || group.type !== "consumer") return [];
  const state = m.member_state.replace(/_/g, " ");      // Kafka's MemberState
  const lines = m.member_state === "stable" ? [`epoch ${m.member_epoch} / group epoch ${group.group_epoch} · stable`]
    : [`epoch ${m.member_epoch} / group epoch ${group.group_epoch}`, `state: ${state}`];
  if (m.member_type === "classic") lines.push("classic member (JoinGroup/SyncGroup)");   // a mixed group
  const revoking = m.pending_revocation.filter(x => x.topic === topic);
  const waiting = m.pending_assignment.filter(x => x.topic === topic);
  for (const x of revoking) lines.push(`revoking P${x.partition} → ${x.to ? short(x.to) : "no member"}`);
  for (const x of waiting)
    lines.push(`pending P${x.partition}: ` + (x.from ? `held by ${short(x.from)}` : "at its next heartbeat"));
  return lines;
}

function drawDiagram(s, topic, group) {
  const svg = document.getElementById("diagram");
  const t = s.topics.find(x => x.name === topic);
  const parts = t ? t.partition_stats : [];
  const producers = s.producers.filter(p => Object.keys(p.by_partition).some(k => k.startsWith(topic + "-")));
  const members = group ? group.members : [];
  const owner = {};
  for (const m of members) for (const [tt, p] of m.assignment) if (tt === topic) owner[p] = m;
  const lag = {};                   // the selected group's lag per partition, from its commits (Kafka's)
  for (const c of group ? group.committed : []) if (c.topic === topic) lag[c.partition] = c.lag;
  const lagText = p => (p in lag && lag[p] != null) ? ` · lag ${lag[p]}` : "";
  ROW = parts.length > 16 ? 22 : 38;
  const compact = ROW < 38;
  const cellH = compact ? 18 : 30;
  const recon = reconciling(group, topic);
  const share = sharing(group, topic);
  const memH = members.map(m => 36 + 13 * (Math.max(1, memberLines(m, topic, group).length) +
                                           memberReconciliation(m, group, topic).length));
  const memY = [];
  members.forEach((m, j) => memY.push(j ? memY[j - 1] + memH[j - 1] + 8 : TOP));
  const memBottom = members.length ? memY[memY.length - 1] + memH[memH.length - 1] - TOP : 0;
  const span = Math.max(parts.length * ROW, producers.length * 38, memBottom, 3 * 38);
  const height = TOP + span + 20;
  svg.setAttribute("height", height);
  const nodes = [];
  const defs = el("defs");
  nodes.push(defs);
  nodes.push(el("text", { x: X.prod, y: 20, class: "title" }, "producers"));
  nodes.push(el("text", { x: X.route, y: 20, class: "title" }, "routing"));
  nodes.push(el("text", { x: X.part, y: 20, class: "title" }, `${topic || "no topic yet"}: partitions`));
  const [title, subtitle] = groupTitle(group);
  nodes.push(el("text", { x: X.mem, y: 16, class: "title", id: "group-title" }, title));
  nodes.push(el("text", { x: X.mem, y: 32, class: "small", id: "group-protocol" }, subtitle));
  if (group && group.type === "share")       // the share group's redeliveries counter, over its partitions
    nodes.push(el("text", { x: X.part, y: 34, class: "small share-counter", id: "share-redeliveries",
                            "data-redeliveries": group.redeliveries, "data-archived-at-limit": group.archived_at_limit },
                  `${group.group_id}: ${group.redeliveries} redeliver${group.redeliveries === 1 ? "y" : "ies"} · ` +
                  `${group.archived_at_limit} archived ` +
                  `at the delivery limit (${group.delivery_count_limit})`));
  const routeY = TOP + span / 2 - 30;
  const n = t ? t.partitions : 0;
  nodes.push(el("rect", { x: X.route, y: routeY, width: X.routeW, height: 60, rx: 8, class: "route" }));
  nodes.push(el("text", { x: X.route + 10, y: routeY + 25, class: "title" }, `murmur2(key) mod ${n}`));
  nodes.push(el("text", { x: X.route + 10, y: routeY + 44, class: "small" }, "Kafka's default partitioner"));
  const geo = { routeIn: [X.route, routeY + 30], routeOut: [X.route + X.routeW, routeY + 30], producers: {}, parts: {},
                cells: {} };
  const faulted = {};               // partition -> the snapshot's recent faults naming it
  for (const f of s.faults ? s.faults.partitions : []) if (f.topic === topic) faulted[f.partition] = f;
  if (!producers.length)
    nodes.push(el("text", { x: X.prod, y: TOP + 15, class: "small" }, "no records in this topic yet"));
  producers.forEach((p, i) => {
    const y = TOP + i * 38;
    geo.producers[p.id] = [X.prod + X.prodW, y + 15];
    nodes.push(el("path", { d: `M${X.prod + X.prodW},${y + 15} C${X.route - 20},${y + 15} ${X.prod + X.prodW + 20},${routeY + 30} ${X.route},${routeY + 30}`,
                            class: "link" }));
    const g = el("g", { "data-producer": p.id, "data-client-id": p.client_id || "" });
    g.append(el("rect", { x: X.prod, y, width: X.prodW, height: 30, rx: 5, class: "box" }));
    g.append(el("title", {}, `${p.id}: ` + Object.entries(p.by_partition).map(([k, v]) => `${k} ${v}`).join(", ") +
      (p.client_id ? "" : ". Kafka's log does not record a client id; kafkasim's producer stamps it in a " +
                          "record header with stamp_headers")));
    g.append(el("text", { x: X.prod + 8, y: y + 13 }, fit(p.client_id ? `client id ${p.client_id}` : p.id, 32)));
    const count = Object.entries(p.by_partition).filter(([k]) => k.startsWith(topic + "-"))
      .reduce((a, [, v]) => a + v, 0);
    g.append(el("text", { x: X.prod + 8, y: y + 26, class: "small" },
                fit(`${count} record${count === 1 ? "" : "s"} · ${producerNote(p)}`, 40)));
    nodes.push(g);
  });
  parts.forEach((p, i) => {
    const y = TOP + i * ROW;
    geo.parts[p.partition] = [X.part, y + cellH / 2];
    geo.cells[p.partition] = { x: X.part, y, width: X.partW, height: cellH };
    const sharers = share.fetchers[p.partition] || [];
    const m = group && group.type === "share" ? null : owner[p.partition];
    const sp = share.state[p.partition];
    const rev = recon.revoking[p.partition], wait = recon.waiting[p.partition];
    nodes.push(el("path", { d: `M${X.route + X.routeW},${routeY + 30} C${X.part - 20},${routeY + 30} ${X.route + X.routeW + 20},${y + cellH / 2} ${X.part},${y + cellH / 2}`,
                            class: "link" }));
    const g = el("g", { "data-partition": `${topic}-${p.partition}`, "data-records": p.records,
                        "data-leo": p.log_end_offset, "data-hw": p.high_watermark, "data-lso": p.last_stable_offset,
                        "data-owner": m ? m.label : "",
                        "data-owner-color": colorOf(m ? m.color : null), "data-leader": p.leader,
                        "data-revoking": rev ? (rev.to || "") : "", "data-pending": wait ? wait.member.label : "",
                        "data-pending-from": wait && wait.from ? wait.from : "",
                        "data-faults": faulted[p.partition] ? faulted[p.partition].labels.join(" · ") : "" });
    if (group && group.type === "share") {   // the share-partition: who fetches from it, what is in flight
      Object.entries({ "data-sharers": sharers.map(x => x.label).join(","),
                       "data-in-flight": sp && sp.initialized ? sp.in_flight : "",
                       "data-delivered": sp && sp.initialized ? sp.delivered : "",
                       "data-redeliveries": sp && sp.initialized ? sp.redeliveries : "",
                       "data-redelivered": sp && sp.initialized ? sp.redelivered : "",
                       "data-archived-at-limit": sp && sp.initialized ? sp.archived_at_limit : "",
                       "data-spso": sp && sp.initialized ? sp.start_offset : "" }).forEach(([k, v]) => g.setAttribute(k, v));
    }
    const fill = colorOf(m ? m.color : null);
    const cell = { x: X.part, y, width: X.partW, height: cellH, rx: 4, fill, "fill-opacity": 0.28,
                   stroke: p.leader === -1 ? "#e15759" : fill, "stroke-width": p.leader === -1 ? 3 : 1 };
    if (rev) {               // its owner is giving it up: striped and outlined in the owner's colour
      Object.assign(cell, { fill: stripes(defs, m.color), "fill-opacity": 1, "stroke-width": 2,
                            "stroke-dasharray": "6 3", class: "revoking" });
    } else if (wait) {       // nobody owns it yet: dashed in the colour of the member waiting for it
      Object.assign(cell, { fill: "#ffffff", "fill-opacity": 1, stroke: colorOf(wait.member.color), "stroke-width": 2,
                            "stroke-dasharray": "4 4", class: "pending" });
    }
    if (sharers.length)      // a share group's partition: no one owner; its members are the bar's slices
      Object.assign(cell, { fill: "#eef0f6", "fill-opacity": 1, stroke: "#8a8fa8", class: "shared" });
    g.append(el("rect", cell));
    if (sharers.length) {    // one slice of the bar per member fetching from it, in its colour
      sharers.forEach((x, k) => g.append(el("rect", { x: X.part, y: y + k * cellH / sharers.length, width: 16,
                                                      height: cellH / sharers.length, fill: colorOf(x.color),
                                                      class: "owner-bar" })));
    } else g.append(el("rect", { x: X.part, y, width: 16, height: cellH, fill, class: "owner-bar" }));
    const recs = `${p.records} record${p.records === 1 ? "" : "s"}`;
    if (compact) {
      g.append(el("text", { x: X.part + 24, y: y + cellH - 5, class: "count" },
                  `P${p.partition} · ${recs} · ${offsets(p)}${lagText(p.partition)} · ${p.rate.toFixed(1)} rec/s · ` +
                  leadership(p)));
    } else {
      g.append(el("text", { x: X.part + 24, y: y + 13, class: "title" }, `P${p.partition}`));
      g.append(el("text", { x: X.part + 60, y: y + 13, class: "count" }, recs));
      g.append(el("text", { x: X.part + 24, y: y + 26, class: "small" },
                  `${offsets(p)}${lagText(p.partition)} · ${p.rate.toFixed(1)} rec/s · ` + leadership(p)));
    }
    g.append(el("title", {}, `${topic}-${p.partition}: ${recs}, log ${p.log_start_offset}..${p.log_end_offset}, ` +
                             `high watermark ${p.high_watermark}, last stable offset ${p.last_stable_offset}, ` +
                             `${p.segments} segment(s), ` + (group && group.type === "share"
                               ? `fetched by ${sharers.map(x => x.label).join(", ") || "no member"}; ${inFlightDetail(sp)}`
                               : `owner ${m ? m.label : "none"}`)));
    if (group && group.type === "share") {   // in flight and redeliveries, on the right of the first line
      const text = inFlightText(sp);
      if (compact)
        g.append(el("rect", { x: X.part + X.partW - 10 - 6.5 * text.length, y: y + 2, width: 6.5 * text.length + 6,
                              height: cellH - 4, fill: "#ffffff", "fill-opacity": 0.9 }));
      g.append(el("text", { x: X.part + X.partW - 6, y: y + (compact ? cellH - 5 : 13), "text-anchor": "end",
                            class: "share-inflight" + (sp && sp.redeliveries ? " redelivered" : "") }, text));
    }
    if (rev || wait) {        // drawn last: over the numbers in a compact row
      const to = rev ? rev.to : wait.member.label;
      const text = rev ? `revoking → ${to ? short(to) : "no member"}` : `pending → ${short(to)}`;
      if (compact)           // over the one-line numbers: on a white ground to stay legible
        g.append(el("rect", { x: X.part + X.partW - 10 - 6.5 * text.length, y: y + 2, width: 6.5 * text.length + 6,
                              height: cellH - 4, fill: "#ffffff", "fill-opacity": 0.9 }));
      g.append(el("text", { x: X.part + X.partW - 6, y: y + (compact ? cellH - 5 : 13), "text-anchor": "end",
                            class: "recon " + (rev ? "revoking" : "pending") }, text));
    }
    const f = faulted[p.partition];
    if (f) {                 // recent injected faults: a red label on a white ground, left of any recon label
      const text = f.labels.join(" · ");
      const right = X.part + X.partW - 6 - (rev || wait ? 6.5 * (rev ? 16 : 12) + 10 : 0);
      const width = 6.2 * text.length + 8;
      const tag = el("g", { class: "fault-tag" });
      tag.append(el("rect", { x: right - width + 4, y: y + 2, width, height: Math.min(cellH - 4, 15), rx: 3,
                              class: "fault-ground" }));
      tag.append(el("text", { x: right, y: y + 13, "text-anchor": "end", class: "fault-label" }, text));
      tag.append(el("title", {}, `injected in the last ${s.faults.window_ms / 1000} s: ${f.count} fault(s) on ` +
                                 `${f.apis.join(", ")} requests to broker ${f.brokers.join(", ")}`));
      g.append(tag);
    }
    nodes.push(g);
    for (const x of sharers) {   // a share group: an edge to every member fetching from the partition
      const j = members.indexOf(x);
      nodes.push(el("path", { d: `M${X.part + X.partW},${y + cellH / 2} C${X.mem - 30},${y + 15} ${X.part + X.partW + 30},${memY[j] + 20} ${X.mem},${memY[j] + 20}`,
                              class: "own share-link", stroke: colorOf(x.color),
                              "data-edge": `${topic}-${p.partition}>${x.member_id}` }));
    }
    if (m) {
      const j = members.indexOf(m);
      nodes.push(el("path", { d: `M${X.part + X.partW},${y + cellH / 2} C${X.mem - 30},${y + 15} ${X.part + X.partW + 30},${memY[j] + 20} ${X.mem},${memY[j] + 20}`,
                              class: "own", stroke: colorOf(m.color) }));
    }
    if (wait) {              // where it is going: a dashed arrow to the member waiting for it
      const j = members.indexOf(wait.member);
      const arrow = `arrow-${wait.member.color % PALETTE.length}`;
      if (!defs.querySelector(`#${arrow}`)) {
        const mk = el("marker", { id: arrow, viewBox: "0 0 10 10", refX: 9, refY: 5,
                                  markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
        mk.append(el("path", { d: "M0,0 L10,5 L0,10 z", fill: colorOf(wait.member.color) }));
        defs.append(mk);
      }
      nodes.push(el("path", { d: `M${X.part + X.partW},${y + cellH / 2} C${X.mem - 30},${y + cellH / 2} ${X.part + X.partW + 30},${memY[j] + 28} ${X.mem - 4},${memY[j] + 28}`,
                              class: "own pending-link", stroke: colorOf(wait.member.color), "marker-end": `url(#${arrow})` }));
    }
  });
  members.forEach((m, j) => {
    const y = memY[j];
    const mine = m.partitions.filter(x => x.topic === topic);
    const g = el("g", { "data-member": m.member_id, "data-color": colorOf(m.color), "data-client-id": m.client_id || "",
                        "data-owns": mine.map(x => `${x.topic}-${x.partition}`).join(","),
                        "data-member-epoch": m.member_epoch == null ? "" : m.member_epoch });
    g.append(el("rect", { x: X.mem, y, width: X.memW, height: memH[j], rx: 6, fill: colorOf(m.color), "fill-opacity": 0.35,
                          stroke: colorOf(m.color) }));
    g.append(el("text", { x: X.mem + 8, y: y + 15, class: "title" }, fit(m.label, 34)));
    g.append(el("title", {}, `${m.label}: member id ${m.member_id}` +
                             (m.group_instance_id ? `, static instance ${m.group_instance_id}` : "") +
                             ". Position: the member's last fetch offset (recorded by kafkasim serve); " +
                             "committed and lag: from its commits, as kafka-consumer-groups shows them"));
    g.append(el("text", { x: X.mem + 8, y: y + 30, class: "small" }, `host ${m.client_host || "in-process"}`));
    const extra = memberReconciliation(m, group, topic);
    extra.forEach((line, k) => g.append(el("text", { x: X.mem + 8, y: y + 44 + 13 * k,
                                                     class: "small recon" + (k ? "" : " epoch") }, fit(line, 48))));
    const top = y + 44 + 13 * extra.length;
    const lines = memberLines(m, topic, group);
    if (!lines.length) g.append(el("text", { x: X.mem + 8, y: top, class: "small" },
                                   group && group.type === "share" ? "fetches nothing of this topic" : "owns nothing of this topic"));
    mine.forEach((x, k) => g.append(el("text", { x: X.mem + 8, y: top + 13 * k, class: "small",
                                                  "data-tp": `${x.topic}-${x.partition}`,
                                                  "data-position": x.position == null ? "" : x.position,
                                                  "data-committed": x.committed == null ? "" : x.committed },
                                      fit(lines[k], 44))));
    nodes.push(g);
  });
  if (group && members.length && !group.positions_known && group.type !== "share")
    nodes.push(el("text", { x: X.mem, y: height - 6, class: "small" },
                  "position ?: known for groups served by kafkasim serve (last fetch offset)"));
  document.getElementById("drawing").replaceChildren(...nodes);
  for (const tag of document.querySelectorAll("#drawing .fault-tag")) {   // the ground fits the label as drawn
    const box = tag.querySelector("text").getBBox();
    Object.entries({ x: box.x - 4, width: box.width + 8 }).forEach(([k, v]) => tag.querySelector("rect").setAttribute(k, v));
  }
  geometry = geo;
  return t;
}

// Each new record of the selected topic travels producer → murmur2(key) mod N → its partition.
function animateFlows(s, topic) {
  const fresh = [];
  const seen = new Set();
  for (const r of s.recent) {
    const id = `${r.topic}-${r.partition}-${r.offset}`;
    seen.add(id);
    if (seenRecords && !seenRecords.has(id) && r.topic === topic) fresh.push(r);
  }
  seenRecords = seen;
  const layer = document.getElementById("flows");
  for (const r of fresh.slice(0, MAX_FLOWS).reverse()) {
    const from = geometry.producers[r.producer];
    const to = geometry.parts[r.partition];
    if (!to) continue;
    const [ax, ay] = from || [X.prod + X.prodW, geometry.routeIn[1]];
    const [bx, by] = geometry.routeIn, [cx, cy] = geometry.routeOut, [dx, dy] = to;
    const path = `M${ax},${ay} C${bx - 20},${ay} ${ax + 20},${by} ${bx},${by} L${cx},${cy} ` +
                 `C${dx - 20},${cy} ${cx + 20},${dy} ${dx},${dy}`;
    const dot = el("circle", { r: 6, class: "flow" + (r.mismatch ? " mismatch" : ""), "data-flow": `${r.topic}-${r.partition}` });
    dot.append(el("title", {}, `${r.key == null ? "null key" : r.key} → P${r.partition}`));
    const move = el("animateMotion", { dur: "0.9s", fill: "freeze", path, begin: "indefinite" });
    dot.append(move);
    layer.append(dot);
    move.beginElement();
    setTimeout(() => dot.remove(), 1100);
  }
  document.body.dataset.flows = String(Number(document.body.dataset.flows || 0) + fresh.length);
}

// A red flash over each partition cell a new injected fault names. Its own layer, which redraws
// leave alone, so the CSS animation runs its course; the rect goes when it ends.
function flashFaults(s, topic) {
  const layer = document.getElementById("fault-flashes");
  for (const f of s.faults ? s.faults.partitions : []) {
    const key = `${f.topic}-${f.partition}`;
    if (f.last_ms <= (faultSeen[key] || 0)) continue;
    faultSeen[key] = f.last_ms;
    const cell = f.topic === topic && geometry.cells[f.partition];
    if (!cell) continue;
    for (const old of layer.querySelectorAll(`[data-fault="${CSS.escape(key)}"]`)) old.remove();
    const r = el("rect", { ...cell, rx: 4, class: "fault-flash", "data-fault": key });
    r.addEventListener("animationend", () => r.remove());
    layer.append(r);
  }
}

function drawRecent(s, topic) {
  const body = document.querySelector("#recent tbody");
  body.replaceChildren(...s.recent.filter(r => r.topic === topic).slice(0, 15).map(r => {
    const tr = h("tr");
    const hashed = r.hash_partition == null ? "null key: not hashed" : String(r.hash_partition);
    if (r.mismatch) tr.className = "mismatch";
    if (r.txn) { tr.classList.add("txn-" + r.txn); tr.dataset.txn = r.txn; }
    for (const v of [when(s, r.timestamp), r.offset, r.key == null ? "null" : r.key, hashed, r.partition,
                     r.routed_by || "–", r.producer, r.txn ? `transaction ${r.txn}` : "–"])
      tr.append(h("td", String(v)));
    return tr;
  }));
  document.getElementById("recent-topic").textContent = topic ? `of ${topic}, newest first` : "newest first";
}

// Open transactions, one row per producer: what holds each partition's LSO back.
function drawTransactions(s) {
  const body = document.querySelector("#transactions tbody");
  const txns = s.transactions || [];
  document.getElementById("no-transactions").hidden = txns.length > 0;
  body.replaceChildren(...txns.map(t => {
    const tr = h("tr");
    tr.dataset.transactionalId = t.transactional_id || "";
    tr.dataset.producerId = t.producer_id;
    tr.dataset.partitions = t.partitions.map(p => `${p.topic}-${p.partition}`).join(",");
    const parts = t.partitions.map(p => `${p.topic}-${p.partition}` +
      (p.first_offset == null ? " (no record yet)" : ` from offset ${p.first_offset}`)).join(", ");
    for (const v of [t.transactional_id || "unknown (not in __transaction_state)",
                     `${t.producer_id}` + (t.producer_epoch == null ? "" : ` / epoch ${t.producer_epoch}`),
                     t.state || "–", parts, duration(s, t.open_ms) +
                       (t.timeout_ms == null ? "" : ` of ${(t.timeout_ms / 1000).toFixed(0)} s timeout`)])
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
    li.textContent = `${when(s, r.timestamp)}: ` + (r.type === "consumer"
      ? `${r.group} target assignment epoch ${r.generation} (consumer protocol, ${r.protocol || "no assignor"}, `
      : r.type === "share" ? `${r.group} share group target assignment epoch ${r.generation} (${r.protocol}, `
      : `${r.group} generation ${r.generation} (${r.protocol || "no protocol"}, `) +
      `${r.members.length} member${r.members.length === 1 ? "" : "s"})` +
      (r.joined.length ? `; joined ${r.joined.join(", ")}` : "") +
      (r.left.length ? `; left ${r.left.join(", ")}` : "") +
      (r.type === "share" ? "" : moved.length ? `; moved ${moved.join("; ")}` : "; no partition moved");
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
    const at = new Date(e.at_ms).toLocaleTimeString();      // the view's own (wall) clock
    return h("li", e.kind === "broker"
      ? `${at}: broker ${e.broker} ${e.from || "unknown"} → ${e.to || "gone"}`
      : `${at}: ${e.topic}-${e.partition} leader ${e.from} → ${e.to === -1 ? "none (offline)" : e.to}`);
  }));
}

function render(s) {
  snapshot = s;
  document.getElementById("datadir").textContent = s.data_dir + (s.behind ? " (catching up…)" : "");
  const clock = document.getElementById("clock");
  clock.textContent = s.clock.simulated ? `times: simulated clock (${s.clock.why})` : "times: wall clock";
  clock.className = s.clock.simulated ? "status simulated" : "muted";
  const topic = chosenTopic(s);
  drawBrokers(s, topic);
  const group = chosenGroup(s);
  const t = drawDiagram(s, topic, group);
  animateFlows(s, topic);
  flashFaults(s, topic);
  drawRecent(s, topic);
  drawTransactions(s);
  drawRebalances(s, group);
  drawClusterEvents(s);
  document.getElementById("summary").textContent = t
    ? `${t.partitions} partitions · ${t.records} record${t.records === 1 ? "" : "s"} · ${s.producers.length} producer(s) · ` +
      `${group ? group.members.length : 0} member(s)` +
      (picked.topic || picked.group ? "" : " · following the most recently written topic and group") : "";
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
  document.getElementById(id).addEventListener("change", ev => {
    picked[id] = ev.target.value;
    if (snapshot) render(snapshot);
  });
connect();
