// The editor's workspace: shows the current assignment, keeps its claim alive
// while the editor is present, submits, skips and releases, and waits for work
// with the API's long poll. Everything from the server is written with
// textContent, never as HTML.
(function () {
  'use strict';

  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute('content');
  var $ = function (id) { return document.getElementById(id); };

  var ACTIVE_MS = 2 * 60 * 1000; // input within this long counts as present
  var WAIT_MS = 25000;           // long poll wait
  var BACKOFF_MAX = 30000;

  var cur = null;           // the assignment shown
  var skew = 0;             // server clock minus ours, from the Date header
  var leaseAt = 0;          // lease end, in our clock
  var heldSince = 0;
  var leaseSpan = 30000;    // lease length, for the heartbeat interval
  var nextBeat = 0;
  var beating = false;
  var holdLimited = false;
  var lastInput = Date.now();
  var waitCtl = null;       // aborts the long poll
  var generation = 0;       // bumps on every state change, to drop stale answers
  var backoff = 1000;
  var reasonSkip = true;
  var ended = false;        // the session has ended: nothing more is asked

  function now() { return Date.now(); }

  function call(method, path, body, signal) {
    if (ended) { return Promise.resolve({ status: 401, data: null }); }
    var opts = { method: method, headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin', signal: signal };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch('/app/v1' + path, opts).then(function (res) {
      var d = Date.parse(res.headers.get('Date') || '');
      if (!isNaN(d)) { skew = d - now(); }
      if (res.status === 204) { return { status: 204, data: null }; }
      return res.json().then(function (data) { return { status: res.status, data: data }; },
        function () { return { status: res.status, data: null }; });
    }, function (err) {
      if (err && err.name === 'AbortError') { throw err; }
      return { status: 0, data: null }; // network down: like a 503
    });
  }

  function message(r) {
    return r.data && r.data.error && r.data.error.message ? r.data.error.message : 'status ' + r.status;
  }

  function setState(s) { document.body.setAttribute('data-state', s); }

  function notice(text, kind) {
    var el = $('status');
    if (!text) { el.hidden = true; el.textContent = ''; return; }
    el.textContent = text;
    el.className = 'notice' + (kind ? ' ' + kind : '');
    el.hidden = false;
  }

  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }

  function present() { return !document.hidden && now() - lastInput < ACTIVE_MS; }

  // whenPresent resolves once the tab is visible and the editor active, so
  // that a walked-away editor is not handed task after task to let expire.
  function whenPresent() {
    if (present()) { return Promise.resolve(); }
    setState('away');
    var el = $('status');
    notice((el.hidden ? '' : el.textContent + ' ') + 'Paused while you are away: press a key or move the mouse to get work.', el.hidden ? '' : el.className.replace('notice', '').trim());
    return new Promise(function (resolve) {
      var evs = ['visibilitychange', 'keydown', 'pointerdown', 'pointermove', 'touchstart'];
      var on = function () {
        if (!present()) { return; }
        evs.forEach(function (ev) { document.removeEventListener(ev, on); });
        notice('');
        setState('waiting');
        resolve();
      };
      evs.forEach(function (ev) { document.addEventListener(ev, on); });
    });
  }

  // signedOut reports whether r says the session has ended (signed out
  // elsewhere, the editor's token replaced, expired). The server has
  // already ended it and cleared its cookie; the page stops asking and shows
  // the sign-in form in place, rather than loading itself again.
  function signedOut(r) {
    if (r.status !== 401) { return false; }
    if (ended) { return true; }
    ended = true;
    generation++;
    cur = null;
    if (waitCtl) { waitCtl.abort(); }
    $('task').hidden = true;
    $('waiting').hidden = true;
    document.querySelector('form.signout').hidden = true;
    document.querySelector('footer').hidden = true;
    $('today').textContent = '';
    notice('');
    $('signed-out').hidden = false;
    setState('signed-out');
    $('token').focus();
    return true;
  }

  // --- today's counts ---
  function refreshMe() {
    return call('GET', '/me').then(function (r) {
      if (signedOut(r)) { return null; }
      if (r.status !== 200) { return null; }
      var t = r.data.today || {};
      $('today').textContent = 'today: ' + (t.submitted || 0) + ' submitted · ' + (t.skipped || 0) +
        ' skipped · ' + (t.released || 0) + ' released · ' + (t.expired || 0) + ' expired';
      return r.data;
    });
  }

  // --- rendering ---
  function clear(el) { while (el.firstChild) { el.removeChild(el.firstChild); } }

  function fmtValue(v) {
    if (typeof v === 'string') { return v; }
    return JSON.stringify(v, null, 2);
  }

  function renderPayload(p) {
    var text = $('t-text'), fields = $('t-fields');
    clear(text); clear(fields);
    if (p === null || typeof p !== 'object' || Array.isArray(p)) {
      var pre = document.createElement('pre');
      pre.textContent = JSON.stringify(p, null, 2);
      text.appendChild(pre);
      return;
    }
    Object.keys(p).forEach(function (k) {
      var v = p[k];
      if ((k === 'text' || k === 'body') && typeof v === 'string') {
        v.split(/\n\s*\n/).forEach(function (para) {
          if (!para.trim()) { return; }
          var el = document.createElement('p');
          el.textContent = para;
          text.appendChild(el);
        });
        return;
      }
      var dt = document.createElement('dt'), dd = document.createElement('dd');
      dt.textContent = k;
      if (v !== null && typeof v === 'object') {
        var pre = document.createElement('pre');
        pre.textContent = fmtValue(v);
        dd.appendChild(pre);
      } else {
        dd.textContent = v === null ? 'null' : String(v);
      }
      fields.appendChild(dt); fields.appendChild(dd);
    });
    fields.hidden = !fields.firstChild;
    text.hidden = !text.firstChild;
  }

  function clock(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var m = Math.floor(s / 60);
    var h = Math.floor(m / 60);
    var pad = function (n) { return (n < 10 ? '0' : '') + n; };
    return h > 0 ? h + ':' + pad(m % 60) + ':' + pad(s % 60) : m + ':' + pad(s % 60);
  }

  function setLease(iso) {
    leaseAt = Date.parse(iso) - skew;
    leaseSpan = Math.max(3000, leaseAt - now());
    nextBeat = now() + leaseSpan / 3;
  }

  function show(a) {
    var same = cur && cur.task.id === a.task.id && cur.fence === a.fence;
    generation++;
    cur = a;
    holdLimited = false;
    heldSince = Date.parse(a.assigned_at) - skew;
    setLease(a.lease_expires_at);
    $('t-title').textContent = a.task.title || '(untitled)';
    $('t-category').textContent = a.task.category;
    $('t-priority').textContent = String(a.task.priority);
    $('t-id').textContent = String(a.task.id);
    renderPayload(a.task.payload);
    if (!same) {
      // A new task starts from the default decision, so that a key pressed
      // out of habit never carries the last task's choice over to this one.
      $('notes').value = '';
      document.querySelector('input[name="decision"][value="approve"]').checked = true;
    }
    hideReason();
    $('waiting').hidden = true;
    $('task').hidden = false;
    $('task').setAttribute('data-task', String(a.task.id));
    $('task').setAttribute('data-fence', String(a.fence));
    setState('task');
    tick();
    if (!same) {
      // A new task is read from its title: the page starts at the top, and
      // focus goes to the title without scrolling, so the keyboard
      // shortcuts work and a screen reader names the task.
      window.scrollTo(0, 0);
      $('t-title').focus({ preventScroll: true });
    }
  }

  function tick() {
    if (!cur) { return; }
    var t = now();
    $('t-held').textContent = clock(t - heldSince);
    var left = leaseAt - t;
    $('t-lease').textContent = clock(left);
    $('t-lease').className = left < leaseSpan / 4 ? 'warn' : '';
    // A second's grace past the end covers the Date header's rounding, so
    // that the server has surely ended the claim too.
    if (left <= -1000) {
      lost('Your lease on task #' + cur.task.id + ' ran out, so the task went back to the pool.');
      return;
    }
    if (present() && !beating && !holdLimited && t >= nextBeat) { heartbeat(); }
  }

  function heartbeat() {
    var a = cur, gen = generation;
    beating = true;
    call('POST', '/assignments/' + a.task.id + '/heartbeat', { fence: a.fence }).then(function (r) {
      beating = false;
      if (gen !== generation) { return; }
      if (signedOut(r)) { return; }
      if (r.status === 200) { setLease(r.data.lease_expires_at); notice(''); backoff = 1000; return; }
      if (r.status === 409 && r.data && r.data.error && r.data.error.code === 'hold_limit') {
        holdLimited = true;
        notice('This task has been held for the longest time allowed, so its lease can no longer be extended. Submit, skip or release it before the lease runs out.', 'warn');
        return;
      }
      if (r.status === 409 || r.status === 403 || r.status === 404) {
        lost('Your claim on task #' + a.task.id + ' was lost: ' + message(r));
        return;
      }
      // 503 or the network: try again soon, while the lease lasts.
      notice('The service is recovering; keeping your claim alive as soon as it is back.', 'warn');
      nextBeat = now() + Math.min(backoff, 5000);
      backoff = Math.min(backoff * 2, BACKOFF_MAX);
    });
  }

  // lost says why the claim is gone and moves on to the next task.
  function lost(text) {
    notice(text + ' Moving on to the next task.', 'bad');
    cur = null;
    waitForWork();
  }

  // --- waiting for work ---
  function waitForWork() {
    generation++;
    var gen = generation;
    cur = null;
    $('task').hidden = true;
    $('waiting').hidden = false;
    setState('waiting');
    if (waitCtl) { waitCtl.abort(); }
    waitCtl = new AbortController();
    var signal = waitCtl.signal;
    var delay = 1000;
    var loop = function () {
      if (gen !== generation) { return undefined; }
      return whenPresent().then(function () {
        return call('POST', '/assignments/next', { wait_ms: WAIT_MS }, signal);
      }).then(function (r) {
        if (gen !== generation) { return undefined; }
        if (signedOut(r)) { return undefined; }
        if (r.status === 200) {
          if (document.body.getAttribute('data-state') === 'recovering') { notice(''); }
          show(r.data);
          return undefined;
        }
        if (r.status === 204) { delay = 1000; setState('waiting'); return loop(); }
        if (r.status === 0 || r.status >= 500) {
          setState('recovering');
          notice('The service is recovering; trying again in ' + Math.round(delay / 1000) + 's.', 'warn');
          var d = delay;
          delay = Math.min(delay * 2, BACKOFF_MAX);
          return sleep(d).then(loop);
        }
        notice('Cannot get work: ' + message(r), 'bad');
        return sleep(BACKOFF_MAX).then(loop);
      }).catch(function () { /* aborted */ });
    };
    loop();
  }

  // --- actions ---
  function decision() {
    var el = document.querySelector('input[name="decision"]:checked');
    return el ? el.value : 'approve';
  }

  var busy = false;
  function act(path, body, done) {
    if (!cur || busy) { return; }
    busy = true;
    var a = cur;
    var attempt = function (delay) {
      return call('POST', '/assignments/' + a.task.id + '/' + path, body).then(function (r) {
        if (signedOut(r)) { return; }
        if (r.status === 200 || r.status === 204) { busy = false; notice(''); done(r); refreshMe(); return; }
        if (r.status === 409 || r.status === 403 || r.status === 404) {
          busy = false;
          lost('Your claim on task #' + a.task.id + ' was lost: ' + message(r));
          refreshMe();
          return;
        }
        if (r.status === 0 || r.status >= 500) {
          notice('The service is recovering; trying again in ' + Math.round(delay / 1000) + 's.', 'warn');
          return sleep(delay).then(function () { return attempt(Math.min(delay * 2, BACKOFF_MAX)); });
        }
        busy = false;
        notice('Not accepted: ' + message(r), 'bad');
      });
    };
    attempt(1000);
  }

  function submit() {
    if (!cur) { return; }
    act('submit', { fence: cur.fence, result: { decision: decision(), notes: $('notes').value } }, function (r) {
      if (r.data && r.data.next) { show(r.data.next); } else { waitForWork(); }
    });
  }

  function askReason(skip) {
    if (!cur) { return; }
    reasonSkip = skip;
    $('reason-what').textContent = skip ? 'skipping' : 'releasing';
    $('reason-row').hidden = false;
    $('reason').value = '';
    $('reason').focus();
  }

  function hideReason() { $('reason-row').hidden = true; }

  function confirmReason() {
    if (!cur) { return; }
    act('release', { fence: cur.fence, reason: $('reason').value, skip: reasonSkip }, function () {
      waitForWork();
    });
  }

  // --- wiring ---
  ['keydown', 'pointerdown', 'pointermove', 'wheel', 'touchstart', 'input'].forEach(function (ev) {
    document.addEventListener(ev, function () { lastInput = now(); }, { passive: true, capture: true });
  });
  document.addEventListener('visibilitychange', function () { if (!document.hidden) { tick(); } });

  $('submit-form').addEventListener('submit', function (e) { e.preventDefault(); submit(); });
  $('b-skip').addEventListener('click', function () { askReason(true); });
  $('b-release').addEventListener('click', function () { askReason(false); });
  $('b-reason').addEventListener('click', confirmReason);
  $('b-cancel').addEventListener('click', hideReason);
  $('reason').addEventListener('keydown', function (e) {
    if (e.key === 'Enter') { e.preventDefault(); confirmReason(); }
    if (e.key === 'Escape') { e.preventDefault(); hideReason(); }
  });
  document.addEventListener('keydown', function (e) {
    if (!cur) { return; }
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); submit(); return; }
    if (!e.altKey) { return; }
    var map = { Digit1: 'approve', Digit2: 'reject', Digit3: 'escalate' };
    if (e.code === 'KeyS') { e.preventDefault(); askReason(true); }
    else if (e.code === 'KeyR') { e.preventDefault(); askReason(false); }
    else if (map[e.code]) {
      e.preventDefault();
      var el = document.querySelector('input[name="decision"][value="' + map[e.code] + '"]');
      if (el) { el.checked = true; }
    }
  });

  setInterval(tick, 1000);
  refreshMe().then(function (me) {
    if (me && me.assignment) { show(me.assignment); } else { waitForWork(); }
  });
}());
