"use strict";
(async () => {
  const C = Classroom;
  const me = await C.session();
  if (me.must_change) { window.location.assign("/password"); return; }
  document.getElementById("who").textContent = me.name;
  if (me.role === "teacher") document.getElementById("teacher-link").hidden = false;
  document.getElementById("signout").addEventListener("click", C.signOut);

  const settings = await C.api("GET", "/api/settings");
  const profile = document.getElementById("profile");
  for (const name of settings.allowed_profiles) profile.append(C.el("option", { value: name }, name));
  document.getElementById("consent-text").textContent = settings.consent_statement;
  document.getElementById("limits").textContent =
    `Limits: ${settings.max_upload_mb} MiB per file, clips up to ${settings.max_clip_seconds} s, ` +
    `${settings.max_queued_jobs} job(s) queued at once; results are kept ${settings.retention_days} days.`;

  // The upload goes through XMLHttpRequest: fetch cannot report upload progress.
  const form = document.getElementById("submit-form");
  const message = document.getElementById("submit-message");
  const bar = document.getElementById("upload-progress");
  const button = document.getElementById("submit-button");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData();
    data.append("profile", profile.value);
    data.append("consent", document.getElementById("consent").checked ? "yes" : "no");
    data.append("source", document.getElementById("source").files[0]);
    data.append("target", document.getElementById("target").files[0]);
    const request = new XMLHttpRequest();
    request.open("POST", "/api/jobs");
    request.setRequestHeader("X-CSRF-Token", C.csrfToken());
    request.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) { bar.max = e.total; bar.value = e.loaded; }
    });
    request.addEventListener("load", () => {
      bar.hidden = true;
      button.disabled = false;
      let answer = null;
      try { answer = JSON.parse(request.responseText); } catch (e) { answer = null; }
      if (request.status === 201) {
        C.say(message, "queued", "ok");
        form.reset();
        refresh();
      } else {
        C.say(message, (answer && answer.detail) || `the server answered ${request.status}`, "error");
      }
    });
    request.addEventListener("error", () => {
      bar.hidden = true;
      button.disabled = false;
      C.say(message, "the upload was cut off (too large, or the server went away)", "error");
    });
    button.disabled = true;
    bar.hidden = false;
    bar.value = 0;
    C.say(message, "uploading and checking …");
    request.send(data);
  });

  async function act(method, url, what) {
    try {
      await C.api(method, url);
      C.say(document.getElementById("jobs-message"), what, "ok");
    } catch (e) {
      C.say(document.getElementById("jobs-message"), e.message, "error");
    }
    refresh();
  }

  function row(job) {
    const files = C.el("td", {},
      C.el("div", {}, "face: ", job.source ? C.el("a", { href: `/api/files/${job.source.file}` }, job.source.name) : "?"),
      C.el("div", {}, "into: ", job.target ? C.el("a", { href: `/api/files/${job.target.file}` }, job.target.name) : "?"));
    const actions = C.el("td", { class: "actions" });
    if (job.output) actions.append(C.el("a", { class: "button download", href: job.output }, "Download result"));
    if (job.report) actions.append(C.el("a", { class: "button secondary report", href: job.report }, "Report"));
    if (job.state === "queued" || job.state === "running") {
      actions.append(C.el("button", { class: "danger cancel",
        onclick: () => act("POST", `/api/jobs/${job.id}/cancel`, "cancelling") }, "Cancel"));
    }
    if (job.state !== "running") {
      actions.append(C.el("button", { class: "danger delete", onclick: () => {
        if (window.confirm("Delete this render and all its files?")) act("DELETE", `/api/jobs/${job.id}`, "deleted");
      } }, "Delete"));
    }
    return C.el("tr", { class: "job", "data-id": job.id, "data-state": job.state },
      C.el("td", {}, C.when(job.submitted)), files, C.el("td", {}, job.profile || ""),
      C.phaseCell(job), actions);
  }

  async function refresh() {
    try {
      const jobs = await C.api("GET", "/api/jobs");
      const body = document.querySelector("#jobs tbody");
      C.renderRows(body, jobs, row);
      document.getElementById("no-jobs").hidden = jobs.length > 0;
    } catch (e) {
      if (e.status === 401) { window.location.assign("/signin"); return; }
      C.say(document.getElementById("jobs-message"), e.message, "error");
    }
  }

  document.getElementById("token-button").addEventListener("click", async () => {
    const t = await C.api("POST", "/api/tokens");
    document.getElementById("token").textContent = t.token;
  });

  refresh();
  window.setInterval(refresh, 1000);
})();
