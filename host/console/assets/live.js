// Live updates for the console's calls page: the server's events (an
// EventSource on /console/calls/events) put calls in flight and ended calls
// into the tables. Text only (textContent), never markup from the server.
"use strict";

(function () {
  const running = document.querySelector("#running tbody");
  const recent = document.querySelector("#recent tbody");
  if (!running || !recent) {
    return;
  }
  const live = document.getElementById("live");
  const MAX_ROWS = 200;

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    if (className) {
      td.className = className;
    }
    row.appendChild(td);
    return td;
  }

  const events = new EventSource("/console/calls/events");
  events.addEventListener("open", function () {
    live.textContent = "live";
    live.className = "live";
  });
  events.addEventListener("error", function () {
    live.textContent = "reconnecting";
    live.className = "live off";
  });
  events.addEventListener("reload", function () {
    window.location.reload();
  });
  events.addEventListener("started", function (event) {
    const call = JSON.parse(event.data);
    const row = document.createElement("tr");
    row.dataset.id = String(call.id);
    cell(row, call.started);
    cell(row, call.tool);
    cell(row, call.caller);
    running.appendChild(row);
  });
  events.addEventListener("ended", function (event) {
    const call = JSON.parse(event.data);
    for (const row of running.querySelectorAll("tr")) {
      if (row.dataset.id === String(call.id)) {
        row.remove();
      }
    }
  });
  events.addEventListener("call", function (event) {
    const call = JSON.parse(event.data);
    const row = document.createElement("tr");
    row.className = call["class"];
    cell(row, call.time);
    cell(row, call.tool);
    cell(row, call.caller);
    cell(row, call.outcome, "outcome");
    cell(row, call.took);
    cell(row, call.fuel);
    cell(row, call.memory);
    const denials = cell(row, "", "denials");
    for (const denial of call.denials) {
      const line = document.createElement("div");
      line.textContent = denial;
      denials.appendChild(line);
    }
    recent.insertBefore(row, recent.firstChild);
    while (recent.rows.length > MAX_ROWS) {
      recent.deleteRow(recent.rows.length - 1);
    }
  });
})();
