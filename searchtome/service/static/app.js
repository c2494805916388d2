// The competition page's behaviour, under its strict CSP (this file only, no inline code):
// local times beside UTC, the board filter, the team's own runs with final marking, uploads.
// The token lives in this page's memory only: no cookie, no storage.
"use strict";
// A scored run reaches the stored board a moment later (the scoring worker refreshes it just
// after); wait for it, 30 s at most (under the Ladder a run that is no improvement never shows).
async function onBoard(id) {
  for (let i = 0; i < 60; i += 1) {
    const board = await (await fetch("/api/leaderboard")).json();
    if ((board.public.rows || []).some((row) => row.id === id)) return;
    await new Promise((done) => setTimeout(done, 500));
  }
}
document.addEventListener("DOMContentLoaded", () => {
  const $ = (id) => document.getElementById(id);
  const token = () => $("token").value.trim();
  const auth = () => ({ Authorization: "Bearer " + token() });
  const say = (id, text) => { $(id).textContent = text; };

  // Every UTC time also in the visitor's own zone (title and text).
  for (const el of document.querySelectorAll("time.when")) {
    const when = new Date(el.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) continue;
    const local = when.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
    el.textContent = el.getAttribute("datetime").replace("T", " ").replace("Z", " UTC") +
      " (" + local + " your time)";
    el.title = local;
  }

  // Filter: rows whose team or system contains the text.
  $("filter").addEventListener("input", () => {
    const want = $("filter").value.trim().toLowerCase();
    for (const row of document.querySelectorAll("table.board tbody tr[data-filter]")) {
      row.hidden = want !== "" && !row.dataset.filter.includes(want);
    }
  });

  const cell = (text, cls) => {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  };
  const pct = (x) => (x === undefined || x === null) ? "–" : (x * 100).toFixed(1);

  async function showRuns() {
    const sent = await fetch("/api/submissions", { headers: auth() });
    const reply = await sent.json();
    if (!sent.ok) { say("quota", "refused: " + reply.error); $("my-runs").hidden = true; return; }
    const left = reply.remaining;
    let text = "Team " + reply.team + ": " + reply.runs.length + " run(s)";
    if (left) {
      text += "; uploads left today: " + left.today + " of " + left.daily_limit;
      if (left.phase_limit !== null && left.phase_limit !== undefined) {
        text += "; in phase " + left.phase + ": " + left.in_phase + " of " + left.phase_limit;
      }
    }
    say("quota", text);
    const body = $("my-runs").querySelector("tbody");
    body.replaceChildren();
    for (const run of reply.runs) {
      const tr = document.createElement("tr");
      tr.dataset.id = run.id;
      const pub = run.scores && run.scores.public ? run.scores.public.aggregate["R@1"] : undefined;
      tr.append(cell(run.id, "name"), cell(run.system, "name"),
        cell(run.state + (run.error ? ": " + run.error : ""), "name"), cell(pct(pub)),
        cell(run.submitted.replace("T", " ").replace("Z", ""), "nw"));
      const mark = document.createElement("button");
      mark.type = "button";
      mark.className = "final";
      mark.textContent = run.final ? "final: unmark" : "mark final";
      mark.disabled = run.state !== "scored" && !run.final;
      mark.addEventListener("click", () => setFinal(run.id, !run.final));
      const td = cell("", "name");
      td.append(mark);
      tr.append(td);
      body.append(tr);
    }
    $("my-runs").hidden = false;
  }

  async function setFinal(id, final) {
    const sent = await fetch("/api/submissions/" + encodeURIComponent(id) + "/final", {
      method: "POST", headers: { ...auth(), "Content-Type": "application/json" },
      body: JSON.stringify({ final }),
    });
    const reply = await sent.json();
    if (!sent.ok) { say("status", "refused: " + reply.error); return; }
    say("status", id + (final ? " is final" : " is no longer final"));
    await showRuns();
  }

  // The boards from a fresh copy of the page, without a reload (which would forget the token).
  async function refreshBoards() {
    const fresh = new DOMParser().parseFromString(await (await fetch("/")).text(), "text/html");
    for (const table of document.querySelectorAll("table.board")) {
      const next = fresh.getElementById(table.id);
      if (next) table.replaceWith(next);
    }
    $("filter").dispatchEvent(new Event("input"));
  }

  $("team").addEventListener("submit", (event) => { event.preventDefault(); showRuns(); });

  // Upload: the files with the token in an Authorization header, then wait for the score.
  $("upload").addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!token()) { say("status", "enter your team token above first"); return; }
    const body = new FormData();
    body.append("predictions", $("predictions").files[0]);
    body.append("meta", $("meta").files[0]);
    say("status", "uploading…");
    const sent = await fetch("/api/submissions", { method: "POST", headers: auth(), body });
    const reply = await sent.json();
    if (!sent.ok) { say("status", "refused: " + reply.error); return; }
    say("status", "queued as " + reply.id + "; scoring…");
    for (;;) {
      await new Promise((done) => setTimeout(done, 500));
      const poll = await fetch(reply.url, { headers: auth() });
      const state = await poll.json();
      if (!poll.ok) { say("status", "error: " + state.error); return; }
      if (state.state === "scored") {
        say("status", "scored");
        await onBoard(reply.id);
        await refreshBoards();
        await showRuns();
        return;
      }
      if (state.state === "rejected" || state.state === "failed") {
        say("status", state.state + ": " + state.error); return;
      }
    }
  });
});
