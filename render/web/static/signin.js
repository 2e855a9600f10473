"use strict";
document.getElementById("signin").addEventListener("submit", async (event) => {
  event.preventDefault();
  const message = document.getElementById("message");
  const button = document.getElementById("signin-button");
  button.disabled = true;
  Classroom.say(message, "signing in …");
  try {
    const me = await Classroom.api("POST", "/api/session", {
      name: document.getElementById("name").value,
      password: document.getElementById("password").value,
    });
    window.location.assign(me.must_change ? "/password" : me.role === "teacher" ? "/teacher" : "/student");
  } catch (e) {
    Classroom.say(message, e.message, "error");
    button.disabled = false;
  }
});
