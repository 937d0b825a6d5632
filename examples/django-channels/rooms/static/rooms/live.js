// The room page's socket, as djust's client does it: /ws/live/ (or the path in the djust-ws-path
// meta tag: the per-tab prefix), the server's connect frame first, then mount; pushed messages
// listed; reconnect with jittered back-off, except after a refused mount (4400: reload the page).
// "Served by" follows the room: each mounted frame names the backend (and epoch) holding it now,
// so after a move (a handoff, a failover) the page says where the room is, not where the page came from.
(function () {
  var meta = document.querySelector('meta[name="djust-ws-path"]');
  var path = (meta && meta.getAttribute('content')) || '/ws/live/';
  if (path.charAt(0) !== '/' || path.charAt(1) === '/') path = '/ws/live/'; // same host only
  var status = document.getElementById('status');
  var pushed = document.getElementById('pushed');
  var backend = document.getElementById('backend');
  var epoch = document.getElementById('epoch');
  var servedFirst = backend ? backend.textContent : null;
  var failures = 0;
  function connect() {
    var ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path);
    ws.onmessage = function (ev) {
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) { return; }
      if (msg.type === 'connect') {
        ws.send(JSON.stringify({ type: 'mount', url: location.pathname }));
      } else if (msg.type === 'mounted') {
        failures = 0;
        // ROOMGATE: "Served by" follows the room after a move (a handoff, a failover).
        var now = String(msg.backend);
        var was = backend ? backend.textContent : now;
        if (backend) backend.textContent = now;
        if (epoch && typeof msg.epoch === 'number') epoch.textContent = String(msg.epoch);
        document.title = document.title.replace(/\([^()]*\)$/, '(' + now + ')');
        status.textContent = 'Live in room ' + msg.room + ' on ' + now + (now !== was ? ' (moved from ' + was + ')' : now !== servedFirst ? ' (the page came from ' + servedFirst + ')' : '');
      } else if (msg.type === 'push') {
        var m = msg.message;
        var li = document.createElement('li');
        li.textContent = (msg.sender ? msg.sender + ': ' : '') + (m && typeof m.text === 'string' ? m.text : JSON.stringify(m));
        pushed.insertBefore(li, pushed.firstChild);
      } else if (msg.type === 'error') {
        status.textContent = msg.message;
      }
    };
    ws.onclose = function (ev) {
      if (ev.code === 4400) return; // ROOMGATE: a refused mount (another room than the socket's): no reconnect
      var d = Math.min(5000, 500 * Math.pow(2, failures++));
      setTimeout(connect, d / 2 + Math.random() * d / 2);
    };
  }
  connect();
})();
