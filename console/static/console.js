// Arbor's console: the few things the server-rendered pages cannot do
// alone. Writes go through the JSON API under /api/v1/ with the login's
// CSRF token; the tree page follows its node through /api/v1/watch; the
// other pages refresh their main part every few seconds.
"use strict";

const main = document.getElementById("main");
const noticeBox = document.getElementById("notice");

function csrf() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

function notice(msg, bad) {
  noticeBox.textContent = msg;
  noticeBox.classList.toggle("bad", !!bad);
  noticeBox.hidden = !msg;
}

// encodePath makes a node path safe in a URL, one segment at a time.
function encodePath(p) {
  return p.split("/").map(encodeURIComponent).join("/");
}

// api sends a JSON request and answers {ok, status, body}; a refusal is
// shown as a notice.
async function api(method, url, body) {
  const opts = { method, headers: { "X-CSRF-Token": csrf() }, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  let resp, data = {};
  try {
    resp = await fetch(url, opts);
    data = await resp.json().catch(() => ({}));
  } catch (e) {
    notice("The member did not answer: " + e.message, true);
    return { ok: false, status: 0, body: {} };
  }
  if (!resp.ok) {
    notice(data.error || ("Refused: HTTP " + resp.status), true);
  }
  return { ok: resp.ok, status: resp.status, body: data };
}

// refresh replaces the page's main part with the server's rendering of
// it now.
async function refresh() {
  const url = new URL(location.href);
  url.searchParams.set("fragment", "1");
  const resp = await fetch(url, { credentials: "same-origin" });
  main.innerHTML = await resp.text();
}

// busy says whether the user is in the middle of something the page's
// refresh would throw away.
function busy() {
  const a = document.activeElement;
  if (a && main.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
  if (document.querySelector("dialog[open]")) return true;
  const form = document.getElementById("edit-form");
  if (form && !form.hidden) return true;
  return [...main.querySelectorAll("input:not([type=hidden]), textarea")].some((el) => el.value !== "");
}

function nodeEl() {
  return document.getElementById("node");
}

// The tree page follows its node: each event of its watch that differs
// from what the page shows (its data, its children, its existence)
// re-renders the page, unless an edit is open, which is kept, with a
// warning that it will be refused. Comparing, not counting events, is what
// keeps a change made before the watch began (its first event shows it) or
// while the watch was down. A watch the browser gave up on is opened again.
function followNode() {
  const node = nodeEl();
  if (node && window.EventSource) follow(node.dataset.path);
}

// shows says whether the page shows the node as st has it.
function shows(st) {
  const node = nodeEl();
  if (!node || node.dataset.missing) return !st.exists;
  return st.exists && String(st.mzxid ?? 0) === node.dataset.mzxid && String(st.pzxid ?? 0) === node.dataset.pzxid;
}

function follow(path) {
  const events = new EventSource("/api/v1/watch" + encodePath(path));
  events.addEventListener("node", async (e) => {
    const st = JSON.parse(e.data);
    if (shows(st)) return;
    const form = document.getElementById("edit-form");
    if (form && !form.hidden) {
      notice(st.exists
        ? `${path} changed while you edit it (now version ${st.version}): saving will be refused; cancel to see the new data.`
        : `${path} was deleted while you edit it.`, true);
      return;
    }
    await refresh();
    notice(st.exists ? `${path} changed (zxid ${st.zxid}); the page shows it now.` : `${path} was deleted.`);
  });
  events.addEventListener("error", () => {
    if (events.readyState === EventSource.CLOSED) setTimeout(() => follow(path), reopenAfter);
  });
}

// reopenAfter is how long a watch the browser gave up on waits before it is
// opened again (a dropped one the browser reopens itself).
const reopenAfter = 2000;

const autoRefresh = { members: 2000, locks: 2000, sessions: 3000, overview: 5000 };

function startAutoRefresh() {
  const every = autoRefresh[main.dataset.page];
  if (!every) return;
  setInterval(() => { if (!busy() && !document.hidden) refresh(); }, every);
}

document.addEventListener("click", async (e) => {
  const el = e.target.closest("[data-action]");
  if (!el) return;
  switch (el.dataset.action) {
    case "edit": {
      document.getElementById("edit-form").hidden = false;
      el.hidden = true;
      document.getElementById("edit-data").focus();
      break;
    }
    case "cancel-edit":
      notice("");
      await refresh();
      break;
    case "delete": {
      const dialog = document.getElementById("delete-dialog");
      dialog.returnValue = ""; // an earlier close's "delete" must not count again
      dialog.showModal();
      break;
    }
    case "close-session": {
      const id = el.dataset.session;
      if (!confirm(`Close session ${id}? Its ephemeral nodes are deleted and its client is told the session expired.`)) return;
      const r = await api("DELETE", "/api/v1/sessions/" + encodeURIComponent(id));
      if (r.ok) { notice(`Session ${id} closed.`); await refresh(); }
      break;
    }
    case "logout": {
      await api("POST", "/api/v1/logout");
      location.reload();
      break;
    }
  }
});

document.addEventListener("submit", async (e) => {
  const form = e.target;
  const node = nodeEl();
  if (form.id === "login-form") {
    e.preventDefault();
    const r = await api("POST", "/api/v1/login", { user: form.elements["user"].value, password: form.elements["password"].value });
    if (r.ok) {
      // Only back into the console: a link must not send a user elsewhere
      // with the login done.
      const next = new URLSearchParams(location.search).get("next") || "";
      location.href = next.startsWith("/ui/") && !next.startsWith("//") ? next : "/ui/";
    }
  } else if (form.id === "edit-form") {
    e.preventDefault();
    const version = Number(form.elements["version"].value);
    const r = await api("PUT", "/api/v1/tree" + encodePath(node.dataset.path), { data: form.elements["data"].value, version });
    if (r.ok) { notice(`Saved: ${node.dataset.path} is at version ${r.body.stat.version}.`); await refresh(); }
  } else if (form.id === "create-form") {
    e.preventDefault();
    const path = node.dataset.path.replace(/\/$/, "") + "/" + form.elements["name"].value;
    const r = await api("POST", "/api/v1/tree" + encodePath(path), { data: form.elements["data"].value, mode: form.elements["mode"].value });
    if (r.ok) { notice(`Created ${r.body.path}.`); await refresh(); }
  } else if (form.classList.contains("break-form")) {
    e.preventDefault();
    const lock = form.dataset.lock;
    if (!confirm(`Break ${lock}? Its holders lose it at once and the next waiter gets it.`)) return;
    const r = await api("POST", "/api/v1/break", { path: lock, reason: form.elements["reason"].value });
    if (r.ok) { notice(`Broke ${lock}: ${r.body.broken.length} holder node(s) deleted.`); await refresh(); }
  }
});

// The delete dialog's form closes the dialog; its close says which button.
document.addEventListener("close", async (e) => {
  if (e.target.id !== "delete-dialog" || e.target.returnValue !== "delete") return;
  const node = nodeEl();
  const form = document.getElementById("delete-form");
  const params = new URLSearchParams({ version: form.elements["version"].value });
  if (form.elements["recursive"] && form.elements["recursive"].checked) params.set("recursive", "true");
  const r = await api("DELETE", "/api/v1/tree" + encodePath(node.dataset.path) + "?" + params);
  if (r.ok) {
    const parent = node.dataset.path.replace(/\/[^/]*$/, "") || "/";
    location.href = "/ui/tree" + encodePath(parent === "/" ? "/" : parent) + "?deleted=" + encodeURIComponent(node.dataset.path);
  }
}, true);

const deleted = new URLSearchParams(location.search).get("deleted");
if (deleted) notice(`Deleted ${deleted}.`);
followNode();
startAutoRefresh();
