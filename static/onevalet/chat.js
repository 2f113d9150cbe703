// The chat page's live part: one websocket to /ws/chat/, events rendered as they arrive.
// Every stored event carries a seq; the last one seen is kept in sessionStorage so a
// reconnect (exponential back-off) asks the server to replay exactly what was missed.
(function () {
  "use strict";
  const config = JSON.parse(document.getElementById("chat-config").textContent);
  const list = document.getElementById("messages");
  const form = document.getElementById("send");
  const input = document.getElementById("content");
  const statusLine = document.getElementById("status");
  const notifications = document.getElementById("notifications");
  const SEQ_KEY = "onevalet.lastSeq";
  let conversation = config.conversation;
  let socket = null;
  let retryDelay = 500;
  const bubbles = new Map(); // "run:turn" -> element being streamed into
  const tools = new Map(); // tool_call_id -> activity element

  function seqKey(seq) {
    const [ms, n] = String(seq).split("-").map(Number);
    return [ms || 0, n || 0];
  }
  function isNewer(seq) {
    const last = sessionStorage.getItem(SEQ_KEY);
    if (!last) return true;
    const [a, b] = seqKey(seq), [c, d] = seqKey(last);
    return a > c || (a === c && b > d);
  }
  function add(className, text) {
    const item = document.createElement("li");
    item.className = className;
    item.textContent = text;
    list.appendChild(item);
    item.scrollIntoView({block: "end"});
    return item;
  }
  function bubble(event) {
    const key = event.run + ":" + event.turn;
    if (!bubbles.has(key)) bubbles.set(key, add("msg assistant streaming", ""));
    return bubbles.get(key);
  }

  const handlers = {
    accepted(event) {
      if (!conversation) {
        conversation = event.conversation;
        history.replaceState(null, "", "?c=" + encodeURIComponent(conversation));
      }
    },
    message_start(event) { bubble(event); },
    message_chunk(event) { bubble(event).textContent += event.delta; },
    message_end(event) {
      const item = bubble(event);
      item.classList.remove("streaming");
      if (event.content) item.textContent = event.content;
      else item.remove();
    },
    tool_call_start(event) {
      tools.set(event.tool_call_id, add("activity running", "Checking " + event.name + "…"));
    },
    tool_result(event) {
      const item = tools.get(event.tool_call_id) || add("activity", event.name);
      item.classList.remove("running");
      item.classList.add(event.success ? "ok" : "failed");
      item.textContent = event.name + " " + (event.success ? "✓" : "✗");
    },
    state_change(event) {
      const card = add("card approval", event.prompt || "Your valet is waiting for you.");
      if (event.state === "waiting_for_approval") {
        const link = document.createElement("a");
        link.href = "/approvals/";
        link.textContent = "Review the approval";
        card.appendChild(document.createElement("br"));
        card.appendChild(link);
      }
    },
    execution_end() { statusLine.textContent = "Connected"; },
    error(event) { add("error", event.message || "Something went wrong."); },
    notification(event) {
      const item = document.createElement("li");
      item.className = "unread";
      const title = event.link ? document.createElement("a") : document.createElement("strong");
      if (event.link) title.href = event.link;
      title.textContent = event.title;
      item.appendChild(title);
      if (event.body) {
        const body = document.createElement("small");
        body.textContent = event.body;
        item.appendChild(body);
      }
      notifications.prepend(item);
    },
    resynced(event) {
      if (!event.complete) location.reload(); // older events were trimmed: start from the page
    },
    pong() {},
  };

  // Acknowledge what was handled, so the server keeps only a bounded number of events in
  // flight to this page (it pauses when we fall behind and resumes on the next ack).
  let unacked = 0;
  function ack() {
    const last = sessionStorage.getItem(SEQ_KEY);
    if (unacked && last && socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({type: "ack", seq: last}));
      unacked = 0;
    }
  }
  setInterval(ack, 1000);

  function onEvent(event) {
    if (event.seq) {
      if (!isNewer(event.seq)) return; // already shown (a replay overlapping live events)
      sessionStorage.setItem(SEQ_KEY, event.seq);
      if (++unacked >= 32) ack();
    }
    const isOtherConversation = event.conversation && conversation && event.conversation !== conversation;
    if (isOtherConversation && event.type !== "notification") return;
    if (handlers[event.type]) handlers[event.type](event);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    socket = new WebSocket(scheme + location.host + config.socket, ["onevalet"]);
    statusLine.textContent = "Connecting…";
    socket.onopen = function () {
      retryDelay = 500;
      statusLine.textContent = "Connected";
      const last = sessionStorage.getItem(SEQ_KEY);
      if (last) {
        socket.send(JSON.stringify({type: "ack", seq: last})); // turns flow control on
        socket.send(JSON.stringify({type: "resync", after: last}));
      }
    };
    socket.onmessage = function (message) { onEvent(JSON.parse(message.data)); };
    socket.onclose = function (close) {
      if (close.code === 4401) { location.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname); return; }
      statusLine.textContent = "Reconnecting…";
      const delay = retryDelay * (0.75 + Math.random() / 2);
      retryDelay = Math.min(retryDelay * 2, 30000);
      setTimeout(connect, delay);
    };
  }

  form.addEventListener("submit", function (submit) {
    submit.preventDefault();
    const content = input.value.trim();
    if (!content || !socket || socket.readyState !== WebSocket.OPEN) return;
    add("msg user", content);
    socket.send(JSON.stringify({type: "message", content: content, conversation: conversation}));
    input.value = "";
  });
  input.addEventListener("keydown", function (key) {
    if (key.key === "Enter" && !key.shiftKey) { key.preventDefault(); form.requestSubmit(); }
  });
  connect();
})();
