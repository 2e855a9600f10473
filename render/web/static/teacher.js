"use strict";
(async () => {
  const C = Classroom;
  const me = await C.session();
  if (me.must_change) { window.location.assign("/password"); return; }
  if (me.role !== "teacher") { window.location.assign("/student"); return; }
  document.getElementById("who").textContent = me.name;
  document.getElementById("signout").addEventListener("click", C.signOut);
  const jobsMessage = document.getElementById("jobs-message");

  async function act(method, url, what) {
    try {
      await C.api(method, url);
      C.say(jobsMessage, what, "ok");
    } catch (e) {
      C.say(jobsMessage, e.message, "error");
    }
    refresh();
  }

  function row(job) {
    const files = C.el("td", { class: "files" });
    if (job.source) files.append(...C.faces(job));
    if (job.target) files.append(C.el("div", {}, "into: ", C.name(job.target.name, `/api/files/${job.target.file}`)));
    if (job.mode) files.append(C.el("div", { class: "muted mode" }, job.mode));
    if (job.voice) files.append(C.el("div", {}, "voice: ", C.name(job.voice.name, `/api/files/${job.voice.file}`)));
    if (!job.classroom) files.append(C.el("span", { class: "muted" }, "(render submit)"));
    const actions = C.el("td", { class: "actions" });
    if (job.output) actions.append(C.el("a", { class: "button download", href: job.output }, "Result"));
    if (job.report) actions.append(C.el("a", { class: "button secondary report", href: `${job.report}?inline=1`, target: "_blank", rel: "noopener" }, "Report"));
    if (job.review_sheet) actions.append(C.el("a", { class: "button secondary review-sheet", href: job.review_sheet, target: "_blank", rel: "noopener" }, "Review"));
    if (job.state === "queued" || job.state === "running") {
      actions.append(C.el("button", { class: "danger cancel",
        onclick: () => act("POST", `/api/jobs/${job.id}/cancel`, `job ${job.id}: cancelling`) }, "Cancel"));
    }
    if (job.state === "failed" || job.state === "cancelled") {
      actions.append(C.el("button", { class: "secondary retry",
        onclick: () => act("POST", `/api/jobs/${job.id}/retry`, `job ${job.id}: queued again`) }, "Retry"));
    }
    if (job.state !== "running") {
      actions.append(C.el("button", { class: "danger delete", onclick: () => {
        if (window.confirm(`Delete job ${job.id} of ${job.owner} and all its files?`)) {
          act("DELETE", `/api/jobs/${job.id}`, `job ${job.id}: deleted`);
        }
      } }, "Delete"));
    }
    const status = C.phaseCell(job);
    if (job.review) status.append(C.verdict(job.review));
    return C.el("tr", { class: "job", "data-id": job.id, "data-state": job.state, "data-owner": job.owner },
      C.el("td", { class: "owner" }, job.owner), C.el("td", {}, C.when(job.submitted)), files,
      C.el("td", {}, [job.profile || "", ...(job.extras || [])].join(" + ")), status, actions);
  }

  function showStatus(status) {
    const devices = document.getElementById("devices");
    devices.replaceChildren(...status.devices.map((d) => C.el("li", { class: d.held ? "held" : "free" },
      C.el("b", {}, `${d.device}${status.devices.length > 1 ? ` slot ${d.slot}` : ""}: `),
      d.held ? `busy, ${d.holder}${d.owner ? ` for ${d.owner}` : ""}` : "free")));
    document.getElementById("no-devices").hidden = status.devices.length > 0;
    const queue = document.getElementById("queue");
    queue.replaceChildren(...status.queue.map((q) => C.el("li", {}, `${q.owner} (job ${q.id})`)));
    document.getElementById("queue-empty").hidden = status.queue.length > 0;
    const disk = status.disk;
    document.getElementById("disk").textContent =
      `${C.bytes(disk.free)} free of ${C.bytes(disk.total)}; the class uses ${C.bytes(disk.classroom)}. ` +
      `Uploads are refused when less than ${C.bytes(disk.min_free)} would stay free.`;
    document.querySelector("#disk-students tbody").replaceChildren(...Object.entries(disk.by_student)
      .map(([name, n]) => C.el("tr", {}, C.el("td", {}, name), C.el("td", {}, C.bytes(n)))));
  }

  async function refresh() {
    try {
      const [jobs, status] = await Promise.all([C.api("GET", "/api/jobs"), C.api("GET", "/api/status")]);
      C.renderRows(document.querySelector("#jobs tbody"), jobs, row);
      document.getElementById("no-jobs").hidden = jobs.length > 0;
      showStatus(status);
    } catch (e) {
      if (e.status === 401) { window.location.assign("/signin"); return; }
      C.say(jobsMessage, e.message, "error");
    }
  }

  // -- class settings --------------------------------------------------------------------------
  const keys = ["max_upload_mb", "max_clip_seconds", "max_queued_jobs", "retention_days"];
  function showSettings(s) {
    const box = document.getElementById("profiles");
    box.replaceChildren(C.el("span", { class: "muted" }, "Profiles students may choose: "),
      ...s.profiles.map((name) => C.el("label", { class: "inline" },
        C.el("input", { type: "checkbox", name: "profile", value: name,
                        checked: s.allowed_profiles.includes(name) }), name)));
    for (const key of keys) document.getElementById(key).value = s[key];
  }
  showSettings(await C.api("GET", "/api/settings"));
  document.getElementById("settings-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const message = document.getElementById("settings-message");
    const body = { allowed_profiles: [...document.querySelectorAll("#profiles input:checked")].map((i) => i.value) };
    for (const key of keys) body[key] = Number(document.getElementById(key).value);
    try {
      showSettings(await C.api("PUT", "/api/settings", body));
      C.say(message, "saved", "ok");
    } catch (e) {
      C.say(message, e.message, "error");
    }
  });

  const users = await C.api("GET", "/api/users");
  document.querySelector("#users tbody").replaceChildren(...users.map((u) => C.el("tr", {},
    C.el("td", {}, u.name), C.el("td", {}, u.role),
    C.el("td", {}, u.disabled ? "disabled" : u.must_change ? "one-time password" : "active"),
    C.el("td", {}, u.last_signin ? C.when(new Date(u.last_signin * 1000).toISOString()) : "never"))));

  refresh();
  window.setInterval(refresh, 2000);
})();
