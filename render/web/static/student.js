"use strict";
(async () => {
  const C = Classroom;
  const me = await C.session();
  if (me.must_change) { window.location.assign("/password"); return; }
  document.getElementById("who").textContent = me.name;
  if (me.role === "teacher") document.getElementById("teacher-link").hidden = false;
  document.getElementById("signout").addEventListener("click", C.signOut);
  const label = (job) => (job.target && job.target.name) || "your clip";

  // the form is wired before the settings arrive, so an early click is never a plain GET
  const settingsCall = C.api("GET", "/api/settings");
  const profile = document.getElementById("profile");
  let settings = { extras: [], extras_by_profile: {} };
  const $ = (id) => document.getElementById(id);
  // the extras the chosen profile can have (a model may be there for one profile only)
  const offered = () => (settings.extras_by_profile || {})[profile.value] || settings.extras || [];
  const ageWords = (v) => (v > 0 ? `+${v} (older)` : v < 0 ? `${v} (younger)` : "0 (unchanged)");
  function showExtras() {
    const on = offered();
    for (const extra of ["upscale", "background", "mouth"]) $(extra).closest("label").hidden = !on.includes(extra);
    for (const extra of ["expression", "age", "voice"]) $(`${extra}-box`).hidden = !on.includes(extra);
    $("extras").hidden = on.length === 0;
    $("expression-factor-box").hidden = !$("expression").checked;
    $("expression-factor-text").textContent = `${$("expression-factor").value} %`;
    $("age-text").textContent = ageWords(Number($("age").value));
    $("voice-mix-box").hidden = !$("voice").files.length;
  }
  for (const id of ["expression", "expression-factor", "age", "voice", "profile"])
    $(id).addEventListener(id === "voice" || id === "profile" || id === "expression" ? "change" : "input", showExtras);
  // what the form asks for beside the swap: only the extras shown
  function appendExtras(data) {
    const on = offered();
    for (const extra of ["upscale", "background", "mouth"])
      if (on.includes(extra)) data.append(extra, $(extra).checked ? "yes" : "no");
    if (on.includes("expression") && $("expression").checked) data.append("expression", $("expression-factor").value);
    if (on.includes("age") && $("age").value !== "0") data.append("age", $("age").value);
    if (on.includes("voice") && $("voice").files.length) {
      data.append("voice", $("voice").files[0]);
      data.append("voice_mix", $("voice-mix").checked ? "mix" : "replace");
    }
  }

  // The upload goes through XMLHttpRequest: fetch cannot report upload progress.
  const form = document.getElementById("submit-form");
  const message = document.getElementById("submit-message");
  const bar = document.getElementById("upload-progress");
  const button = document.getElementById("submit-button");
  Picker.init();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const problem = Picker.problem();
    if (problem) { C.say(message, problem, "error"); return; }
    const data = new FormData();
    data.append("profile", profile.value);
    data.append("consent", document.getElementById("consent").checked ? "yes" : "no");
    appendExtras(data);
    data.append("source", document.getElementById("source").files[0]);
    data.append("target", document.getElementById("target").files[0]);
    Picker.append(data);
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
        Picker.reset();
        showExtras();
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

  settings = await settingsCall;
  for (const name of settings.allowed_profiles) profile.append(C.el("option", { value: name }, name));
  document.getElementById("consent-text").textContent = settings.consent_statement;
  for (const [field, range] of Object.entries(settings.extra_ranges || {})) {
    const slider = $(field === "expression" ? "expression-factor" : field);
    Object.assign(slider, { min: range.min, max: range.max });
    slider.defaultValue = slider.value = range.default;
  }
  showExtras();
  document.getElementById("limits").textContent =
    `Limits: ${settings.max_upload_mb} MiB per file, clips up to ${settings.max_clip_seconds} s, ` +
    `${settings.max_queued_jobs} job(s) queued at once; results are kept ${settings.retention_days} days.`;

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
    const files = C.el("td", { class: "files" }, ...C.faces(job),
      C.el("div", {}, "into: ", job.target ? C.name(job.target.name, `/api/files/${job.target.file}`) : "?"));
    if (job.mode) files.append(C.el("div", { class: "muted mode" }, job.mode));
    if (job.voice) files.append(C.el("div", {}, "voice: ", C.name(job.voice.name, `/api/files/${job.voice.file}`)));
    const actions = C.el("td", { class: "actions" });
    const what = label(job);
    if (job.output) {
      actions.append(C.el("button", { class: "watch", "aria-label": `Watch the result of ${what}`,
                                      onclick: () => show(job) }, "Watch"));
      actions.append(C.el("a", { class: "button secondary download", href: job.output,
                                 "aria-label": `Download the result of ${what}` }, "Download"));
    }
    if (job.card) actions.append(C.el("button", { class: "secondary report",
      "aria-label": `Report of ${what}`, onclick: () => show(job, true) }, "Report"));
    if (job.state === "queued" || job.state === "running") {
      actions.append(C.el("button", { class: "danger cancel", "aria-label": `Cancel ${what}`,
        onclick: () => act("POST", `/api/jobs/${job.id}/cancel`, "cancelling") }, "Cancel"));
    }
    if (job.state !== "running") {
      actions.append(C.el("button", { class: "danger delete", "aria-label": `Delete ${what}`, onclick: () => {
        if (window.confirm("Delete this render and all its files?")) act("DELETE", `/api/jobs/${job.id}`, "deleted");
      } }, "Delete"));
    }
    return C.el("tr", { class: "job", "data-id": job.id, "data-state": job.state },
      C.el("td", {}, C.when(job.submitted)), files, C.el("td", {}, [job.profile || "", ...(job.extras || [])].join(" + ")),
      C.phaseCell(job), actions);
  }

  // The result beside the original, and the report as a card (the JSON one click away).
  const viewer = document.getElementById("viewer");
  function media(kind, src, attrs) {
    if (kind === "image") return C.el("img", { src, alt: attrs["aria-label"], ...attrs });
    return C.el("video", { src, controls: true, preload: "metadata", playsinline: true, ...attrs },
      "This browser cannot play it here: download it instead.");
  }
  async function show(job, cardOnly) {
    viewer.hidden = false;
    document.getElementById("viewer-title").textContent = `Result: ${label(job)}`;
    document.getElementById("viewer-original-name").textContent = label(job);
    document.getElementById("viewer-original-name").title = label(job);
    const kind = job.kind === "image" ? "image" : "video";
    const original = job.target ? media(job.target.kind === "image" ? "image" : "video",
      `/api/files/${job.target.file}?inline=1`, { id: "original", "aria-label": `Original: ${label(job)}` }) : "";
    const result = job.output ? media(kind, `${job.output}?inline=1`,
      { id: "result", poster: kind === "video" ? job.poster : null, "aria-label": `Result of ${label(job)}` }) : "";
    document.getElementById("viewer-original").replaceChildren(original);
    document.getElementById("viewer-result").replaceChildren(result);
    const card = document.getElementById("card");
    card.replaceChildren(C.el("p", { class: "muted" }, "loading the report …"));
    try {
      card.replaceChildren(reportCard(await C.api("GET", job.card), job));
    } catch (e) {
      card.replaceChildren(C.el("p", { class: "message error" }, e.message));
    }
    card.append(reviewPicture(job));
    (cardOnly ? card : viewer).scrollIntoView({ block: "start" });
  }
  document.getElementById("viewer-close").addEventListener("click", () => {
    viewer.querySelectorAll("video").forEach((v) => v.pause());
    viewer.hidden = true;
  });

  function reportCard(r, job) {
    const m = r.made || {};
    const size = m.width ? `${m.width} × ${m.height}` : "";
    const made = m.kind === "video"
      ? `a ${size} video, ${m.frames} frames (${C.duration(m.duration || 0)})${m.video_codec ? `, ${m.video_codec}` : ""}`
      : `a ${size} picture`;
    const swapped = r.swapped ? `faces swapped in ${r.swapped.frames_touched} of ${r.swapped.frames} frames` : "";
    const models = (r.models || []).map((x) => x.name + (x.precision ? ` (${x.precision})` : "")).join(", ");
    const consent = r.consent && r.consent.given
      ? `“${r.consent.statement}”, ticked by ${r.consent.by} on ${C.when(r.consent.at)}` : "not recorded";
    const rows = [["What was made", made], ["Faces", swapped], ["Profile", r.profile || job.profile],
      ["Models", models], ["Time", r.seconds !== null && r.seconds !== undefined
        ? `${C.duration(r.seconds)}${r.fps ? ` (${r.fps.toFixed(1)} frames a second)` : ""}` : ""],
      ["Marked as synthetic", r.synthetic ? `yes${r.marks.length ? ` (${r.marks.join(", ")})` : ""}` : "no"],
      ["Consent", consent]];
    return C.el("div", {},
      C.el("h3", {}, "Report"),
      C.el("dl", {}, ...rows.filter(([, v]) => v).flatMap(([k, v]) => [C.el("dt", {}, k), C.el("dd", {}, v)])),
      C.el("a", { class: "button secondary", id: "report-json", href: `${job.report}?inline=1`,
                  target: "_blank", rel: "noopener" }, "The full report (JSON)"));
  }

  // The review picture: the frames to look at and each face's timeline, made by the server the
  // first time it is asked for (503 while it is being made: asked again after Retry-After).
  function reviewPicture(job) {
    const box = C.el("figure", { id: "review", class: "review" },
      C.el("figcaption", {}, "Review: ", job.review ? job.review.summary : "none"));
    const note = C.el("p", { class: "muted", id: "review-note" });
    box.append(note);
    if (!job.review_sheet) {
      note.textContent = "No review picture: " + (job.kind === "image"
        ? "a picture is not reviewed, only videos are." : "this render was not reviewed.");
      return box;
    }
    note.textContent = "making the review picture …";
    (async () => {
      for (let attempt = 0; attempt < 40; attempt++) {
        let response;
        try {
          response = await fetch(job.review_sheet, { credentials: "same-origin" });
        } catch (e) {
          note.textContent = "No review picture: the server could not be reached.";
          return;
        }
        if (response.ok) {
          const url = URL.createObjectURL(await response.blob());
          note.replaceWith(C.el("img", { id: "review-picture", src: url,
            alt: `Review of ${label(job)}: ${job.review ? job.review.summary : ""}`,
            onload: () => URL.revokeObjectURL(url) }));
          return;
        }
        let detail = null;
        try { detail = (await response.json()).detail; } catch (e) { detail = null; }
        if (response.status !== 503) {
          note.textContent = detail ? detail.replace(/^no review picture/, "No review picture")
                                    : `No review picture (the server answered ${response.status}).`;
          return;
        }
        const wait = Number(response.headers.get("Retry-After")) || 3;
        await new Promise((done) => window.setTimeout(done, wait * 1000));
      }
      note.textContent = "No review picture yet: the server is busy, open the report again later.";
    })();
    return box;
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

  refresh();
  window.setInterval(refresh, 1000);
})();
