"use strict";
(async () => {
  const C = Classroom;
  const me = await C.session();
  if (me.must_change) { window.location.assign("/password"); return; }
  document.getElementById("signout").addEventListener("click", C.signOut);
  document.getElementById("token-button").addEventListener("click", async () => {
    try {
      const t = await C.api("POST", "/api/tokens");
      document.getElementById("token").textContent = t.token;
    } catch (e) {
      document.getElementById("token").textContent = e.message;
    }
  });
})();
