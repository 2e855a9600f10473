// render classroom: helpers shared by the pages (no libraries, nothing from elsewhere).
"use strict";

const Classroom = (() => {
  let csrf = null;

  async function api(method, url, body) {
    const init = { method, headers: {}, credentials: "same-origin" };
    if (method !== "GET" && csrf) init.headers["X-CSRF-Token"] = csrf;
    if (body instanceof FormData) {
      init.body = body;
    } else if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(url, init);
    if (response.status === 204) return null;
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const error = new Error((data && data.detail) || `the server answered ${response.status}`);
      error.status = response.status;
      throw error;
    }
    return data;
  }

  // The signed-in user (and the session's CSRF token), or off to the sign-in page.
  async function session() {
    try {
      const me = await api("GET", "/api/session");
      csrf = me.csrf;
      return me;
    } catch (e) {
      if (e.status === 401) window.location.assign("/signin");
      throw e;
    }
  }

  function setCsrf(token) { csrf = token; }
  function csrfToken() { return csrf; }

  function say(element, text, kind) {
    element.textContent = text || "";
    element.className = "message" + (kind ? " " + kind : "");
  }

  // Element builder: el("td", {class: "x"}, "text", child, ...); text is never parsed as HTML.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function duration(seconds) {
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
    return `${Math.floor(s / 3600)} h ${String(Math.floor(s % 3600 / 60)).padStart(2, "0")} min`;
  }

  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  const STAGES = { rendering: "rendering", assembling: "assembling the clip",
                   marking: "marking it as synthetic" };

  // What a job is doing, in words, and a progress element while it renders.
  function describe(job) {
    const parts = [];
    if (job.phase === "queued") {
      let text = `queued: #${job.queue_position} of ${job.queue_length}`;
      if (job.wait_s !== null && job.wait_s !== undefined) {
        text += job.wait_s < 30 ? " · starts soon" : ` · starts in about ${duration(job.wait_s)}`;
      } else {
        text += " · no estimate yet (no job has finished)";
      }
      parts.push(text);
    } else if (job.phase === "waiting") {
      parts.push("waiting for the GPU");
      if (job.waiting_for) parts.push(job.waiting_for.replace(/^waiting for /, ""));
    } else if (job.progress) {
      const p = job.progress;
      const stage = STAGES[p.stage] || p.stage || "rendering";
      let text = stage;
      if (p.stage === "rendering" || !p.stage) {
        if (p.frames_total) text += `: frame ${p.frames_done || 0} of ${p.frames_total}`;
        else text += `: segment ${p.segments_done} of ${p.segments_total}`;
        if (p.fps) text += ` · ${p.fps.toFixed(1)} fps`;
        if (p.eta_s !== null && p.eta_s !== undefined) text += ` · about ${duration(p.eta_s)} left`;
      }
      parts.push(text);
    } else if (job.phase === "done") {
      parts.push("done");
    } else if (job.error) {
      parts.push(`${job.phase}: ${job.error}`);
    } else {
      parts.push(job.phase + (job.message ? `: ${job.message}` : ""));
    }
    return parts;
  }

  function phaseCell(job) {
    const [first, ...rest] = describe(job);
    const cell = el("td", { class: "status", "aria-live": "polite" },
      el("span", { class: "phase", "data-phase": job.phase }, job.phase));
    const detail = first === job.phase ? null : first.replace(new RegExp(`^${job.phase}: `), "");
    if (detail) cell.append(el("div", { class: "detail" }, detail));
    for (const line of rest) cell.append(el("div", { class: "muted" }, line));
    const p = job.progress;
    if (p && (p.frames_total || p.segments_total)) {
      const [value, max] = p.frames_total ? [p.frames_done || 0, p.frames_total]
                                          : [p.segments_done, p.segments_total];
      cell.append(el("div", {}, el("progress", { max, value, "aria-label": `${job.phase} progress`,
        "data-done": value, "data-total": max })));
    }
    if (job.expires) cell.append(el("div", { class: "muted" }, `kept until ${when(job.expires)}`));
    return cell;
  }

  // The review's verdict of a done job: "ok", or "look: 2 tracks · missed 14 frames at 00:41.2".
  function verdict(review) {
    let text = `review: ${review.summary}`;
    if (review.reason) text += ` · ${review.reason}`;
    if (review.more) text += ` (+${review.more} more)`;
    return el("div", { class: "verdict", "data-verdict": review.verdict }, text);
  }

  // A file name that may be long: shortened with an ellipsis, the whole name on hover.
  function name(text, href) {
    const attrs = { class: "name", title: text };
    return href ? el("a", { ...attrs, href }, text) : el("span", attrs, text);
  }

  // Rows of a table body, one per job, rebuilt only when the job changed (so that a row being
  // clicked is not swapped under the pointer every second).
  function renderRows(body, jobs, build) {
    const old = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
    const rows = jobs.map((job) => {
      const key = JSON.stringify(job);
      const tr = old.get(job.id);
      if (tr && tr.dataset.key === key) return tr;
      const fresh = build(job);
      fresh.dataset.key = key;
      return fresh;
    });
    const same = rows.length === body.children.length && rows.every((tr, i) => body.children[i] === tr);
    if (!same) body.replaceChildren(...rows);
  }

  // The faces a job puts in: "face: a.jpg", and a second photo ("+ b.jpg", or for a second
  // person each photo beside the face clicked for it, shown small).
  function faces(job) {
    const link = (f) => name(f.name, `/api/files/${f.file}`);
    const refs = job.references || [];
    if (!job.source) return [el("div", {}, "face: ?")];
    if (!job.source2) return [el("div", {}, "face: ", link(job.source))];
    if (!refs.length) return [el("div", {}, "faces: ", link(job.source)), el("div", {}, "+ ", link(job.source2))];
    return [job.source, job.source2].map((photo, i) => el("div", { class: "person" },
      refs[i] ? el("span", { class: "clicked" }, el("img", { src: `/api/files/${refs[i].file}?inline=1`,
                                                            alt: `the face clicked for photo ${i + 1}` })) : null,
      el("span", { class: "photo" }, `${i + 1}: `, link(photo))));
  }

  async function signOut() {
    try { await api("DELETE", "/api/session"); } finally { window.location.assign("/signin"); }
  }

  return { api, session, setCsrf, csrfToken, say, el, duration, bytes, when, describe,
           phaseCell, renderRows, signOut, name, faces, verdict };
})();
