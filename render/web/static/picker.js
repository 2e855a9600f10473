// render classroom: the form's second photo. What it is ("another photo of the same person" or
// "a second person"), and for a second person which face of the target becomes which photo: the
// chosen target is shown here (the file itself, never uploaded for this), a frame at a time on a
// canvas, and the student clicks the face for photo 1, then the one for photo 2. Each click is
// sent as "t,x,y": seconds into the target and pixels of the target's own frame.
"use strict";

const Picker = (() => {
  const $ = (id) => document.getElementById(id);
  const picks = [null, null];
  let url = null;       // the target's object URL while it is shown
  let media = null;     // the <video> or <img> the frame comes from, once it has one
  let size = null;      // [width, height] of the target's frame
  let cursor = null;    // the keyboard's crosshair on the frame (arrows move it, Enter picks)

  const other = () => $("source2").files.length > 0 && $("second-other").checked;
  const now = () => (media && media.tagName === "VIDEO" ? media.currentTime : 0);
  const name = (id, fallback) => ($(id).files[0] && $(id).files[0].name) || fallback;
  const same = (pick) => pick && Math.abs(pick.t - now()) < 0.0005;

  function help(text, kind) {
    const p = $("pick-help");
    p.textContent = text;
    p.className = "message" + (kind ? ` ${kind}` : "");
  }

  function describe() {
    const photos = [name("source", "the source photo"), name("source2", "the second photo")];
    picks.forEach((pick, i) => {
      $(`pick${i + 1}-text`).textContent = pick
        ? `photo ${i + 1} (${photos[i]}): the face at ${Math.round(pick.x)}, ${Math.round(pick.y)}` +
          (media && media.tagName === "VIDEO" ? `, ${pick.t.toFixed(2)} s` : "")
        : `photo ${i + 1} (${photos[i]}): not chosen yet`;
    });
    const next = picks.findIndex((p) => p === null);
    if (!size) return;
    if (next >= 0) help(`Click the face that becomes photo ${next + 1} (${photos[next]}).`);
    else help("Both faces are chosen. “Choose again” to change them.", "ok");
    $("pick-canvas").dataset.picks = String(picks.filter((p) => p).length);
  }

  function draw() {
    if (!media || !size) return;
    const canvas = $("pick-canvas");
    canvas.width = size[0];
    canvas.height = size[1];
    const ctx = canvas.getContext("2d");
    ctx.drawImage(media, 0, 0, size[0], size[1]);
    const r = Math.max(8, Math.round(Math.min(size[0], size[1]) / 30));
    picks.forEach((pick, i) => {
      if (!same(pick)) return;        // marked on the frame it was clicked on
      ctx.lineWidth = Math.max(2, r / 4);
      ctx.strokeStyle = "#fff";
      ctx.fillStyle = i === 0 ? "rgba(39, 84, 197, .85)" : "rgba(180, 35, 24, .85)";
      ctx.beginPath();
      ctx.arc(pick.x, pick.y, r, 0, 2 * Math.PI);
      ctx.fill();
      ctx.stroke();
      ctx.fillStyle = "#fff";
      ctx.font = `bold ${Math.round(r * 1.2)}px system-ui, sans-serif`;
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText(String(i + 1), pick.x, pick.y + 1);
    });
    if (cursor && document.activeElement === canvas) {
      ctx.strokeStyle = "#fff";
      ctx.lineWidth = Math.max(2, r / 5);
      ctx.beginPath();
      ctx.moveTo(cursor.x - 2 * r, cursor.y); ctx.lineTo(cursor.x + 2 * r, cursor.y);
      ctx.moveTo(cursor.x, cursor.y - 2 * r); ctx.lineTo(cursor.x, cursor.y + 2 * r);
      ctx.stroke();
    }
    $("pick-time-text").textContent = `${now().toFixed(2)} s`;
    canvas.dataset.ready = "1";
    canvas.dataset.time = String(now());
  }

  function unload() {
    if (url) URL.revokeObjectURL(url);
    url = media = size = cursor = null;
    const video = $("pick-video");
    video.removeAttribute("src");
    video.load();
    $("pick-image").removeAttribute("src");
    $("pick-canvas").dataset.ready = "";
  }

  function cannot() {
    unload();
    help("This browser cannot show this target, so its faces cannot be clicked here: send the " +
         "second photo as another photo of the same person, or convert the clip to MP4.", "error");
  }

  function load() {
    unload();
    picks[0] = picks[1] = null;
    describe();
    const file = $("target").files[0];
    if (!file) { help("Choose the target above first: a frame of it shows here."); return; }
    help("loading the target …");
    url = URL.createObjectURL(file);
    if (file.type.startsWith("image/")) {
      const img = $("pick-image");
      img.onload = () => {
        media = img;
        size = [img.naturalWidth, img.naturalHeight];
        $("pick-time-box").hidden = true;
        draw();
        describe();
      };
      img.onerror = cannot;
      img.src = url;
      return;
    }
    const video = $("pick-video");
    video.onloadeddata = () => {
      media = video;
      size = [video.videoWidth, video.videoHeight];
      const slider = $("pick-time");
      slider.max = String(Math.max(0, video.duration - 0.01));
      slider.value = "0";
      $("pick-time-box").hidden = false;
      draw();
      describe();
    };
    video.onseeked = draw;
    video.onerror = cannot;
    video.src = url;
  }

  function update() {
    const has = $("source2").files.length > 0;
    $("second").hidden = !has;
    const show = other();
    const was = !$("picker").hidden;
    $("picker").hidden = !show;
    if (show && !was) load();
    if (!show && was) unload();
    if (show) describe();
  }

  function click(event) {
    if (!size) return;
    const box = event.currentTarget.getBoundingClientRect();
    choose((event.clientX - box.left) * size[0] / box.width,
           (event.clientY - box.top) * size[1] / box.height);
  }

  // The keyboard: arrows move a crosshair (Shift: in bigger steps), Enter or Space picks there.
  function key(event) {
    if (!size) return;
    cursor = cursor || { x: size[0] / 2, y: size[1] / 2 };
    const step = Math.max(1, Math.round(size[0] / (event.shiftKey ? 10 : 50)));
    const moves = { ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step] };
    if (moves[event.key]) {
      cursor = { x: Math.min(size[0] - 1, Math.max(0, cursor.x + moves[event.key][0])),
                 y: Math.min(size[1] - 1, Math.max(0, cursor.y + moves[event.key][1])) };
    } else if (event.key === "Enter" || event.key === " ") {
      choose(cursor.x, cursor.y);
    } else {
      return;
    }
    event.preventDefault();
    draw();
  }

  function choose(x, y) {
    const next = picks.findIndex((p) => p === null);
    if (next < 0) { help("Both faces are chosen: “Choose again” to change them.", "error"); return; }
    picks[next] = { t: now(), x: Math.min(size[0] - 1, Math.max(0, x)),
                    y: Math.min(size[1] - 1, Math.max(0, y)) };
    draw();
    describe();
  }

  function init() {
    $("source2").addEventListener("change", update);
    $("second-same").addEventListener("change", update);
    $("second-other").addEventListener("change", update);
    $("source").addEventListener("change", describe);
    $("target").addEventListener("change", () => { if (other()) load(); });
    $("pick-canvas").addEventListener("click", click);
    $("pick-canvas").addEventListener("keydown", key);
    $("pick-canvas").addEventListener("focus", draw);
    $("pick-canvas").addEventListener("blur", draw);
    $("pick-time").addEventListener("input", (e) => {
      // a millisecond past the mark: inside a frame, not on the edge between two (frame starts
      // fall on the slider's marks at 25 frames a second)
      if (media && media.tagName === "VIDEO") media.currentTime = Number(e.target.value) + 0.001;
    });
    $("pick-reset").addEventListener("click", () => { picks[0] = picks[1] = null; draw(); describe(); });
  }

  // Why the form cannot be sent yet (null: it can).
  function problem() {
    if (!other()) return null;
    if (!size) return "the target cannot be shown here, so its faces cannot be clicked";
    const next = picks.findIndex((p) => p === null);
    return next < 0 ? null : `click on the target the face that becomes photo ${next + 1}`;
  }

  // The second photo's fields of the form.
  function append(data) {
    if ($("source2").files.length === 0) return;
    data.append("source2", $("source2").files[0]);
    data.append("source2_is", other() ? "second-person" : "same-person");
    if (!other()) return;
    picks.forEach((p, i) => data.append(`pick${i + 1}`,
      `${p.t.toFixed(3)},${Math.round(p.x)},${Math.round(p.y)}`));
  }

  function reset() {
    unload();
    picks[0] = picks[1] = null;
    $("second").hidden = true;
    $("picker").hidden = true;
  }

  return { init, problem, append, reset };
})();
