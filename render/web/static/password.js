"use strict";
(async () => {
  const me = await Classroom.session();
  const form = document.getElementById("password-form");
  const message = document.getElementById("message");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const fresh = document.getElementById("new").value;
    if (fresh !== document.getElementById("again").value) {
      Classroom.say(message, "the two new passwords differ", "error");
      return;
    }
    try {
      await Classroom.api("POST", "/api/password",
                          { current: document.getElementById("current").value, new: fresh });
      window.location.assign(me.role === "teacher" ? "/teacher" : "/student");
    } catch (e) {
      Classroom.say(message, e.message, "error");
    }
  });
})();
