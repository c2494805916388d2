// The upload form: sends the files with the token in an Authorization header (no cookies),
// waits for the score, then for the stored leaderboard to hold the run (the scoring worker
// refreshes it just after), then reloads the page so the new row shows.
"use strict";
async function onBoard(id) {
  for (let i = 0; i < 60; i += 1) {
    const board = await (await fetch("/api/leaderboard")).json();
    if ((board.public.rows || []).some((row) => row.id === id)) break;
    await new Promise((done) => setTimeout(done, 500));
  }
  window.location.reload();
}
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("upload");
  const status = document.getElementById("status");
  const say = (text) => { status.textContent = text; };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const token = document.getElementById("token").value.trim();
    const body = new FormData();
    body.append("predictions", document.getElementById("predictions").files[0]);
    body.append("meta", document.getElementById("meta").files[0]);
    const auth = { Authorization: "Bearer " + token };
    say("uploading…");
    const sent = await fetch("/api/submissions", { method: "POST", headers: auth, body });
    const reply = await sent.json();
    if (!sent.ok) { say("refused: " + reply.error); return; }
    say("queued as " + reply.id + "; scoring…");
    for (;;) {
      await new Promise((done) => setTimeout(done, 500));
      const poll = await fetch(reply.url, { headers: auth });
      const state = await poll.json();
      if (!poll.ok) { say("error: " + state.error); return; }
      if (state.state === "scored") { say("scored"); await onBoard(reply.id); return; }
      if (state.state === "rejected" || state.state === "failed") {
        say(state.state + ": " + state.error); return;
      }
    }
  });
});
