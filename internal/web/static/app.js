// The editor's workspace: shows the current assignment, keeps its claim alive
// while the editor is present, submits, skips and releases, and waits for work
// with the API's long poll. A task with stages shows its stage and the
// results of its earlier stages, and a review stage approves or sends back
// with notes; an editor who may hold several claims sees them all, switches
// between them and keeps each alive. What the editor types is kept in this
// browser until it is handed in, and shown to copy when the claim ends
// first (drafts, below). Everything from the server is written with
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
  // claims keeps each held claim's lease and heartbeat state by task id:
  // {a, leaseAt (in our clock), leaseSpan, nextBeat, beating, holdLimited,
  // assignedAt (the server's clock), heldSince (ours), draft}. The shown one
  // is cur's; with a capacity of 1 it is the only one.
  var claims = {};
  var capacity = 1;         // claims the editor may hold at once
  var meID = 0;
  var lastInput = Date.now();
  // Working time: the shown claim's activeMs grows while the editor is
  // present (see present), from one accrual to the next, by the presence
  // seen at the first of the two.
  var accruedAt = Date.now();
  var wasPresent = true;
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
      var pending = res.headers.get('Taskd-Instructions-Pending');
      if (pending) { instructionsPending(pending); }
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

  // accrue adds the time since the last accrual to the shown claim's active
  // time when the editor was present then: a hidden tab, or ACTIVE_MS without
  // input, stops the clock. A gap over 5s (a timer the browser held back)
  // counts 5s at most.
  function accrue() {
    var t = now();
    var c = cur && claims[cur.task.id];
    if (c && wasPresent) { c.activeMs += Math.min(Math.max(t - accruedAt, 0), 5000); }
    accruedAt = t;
    wasPresent = present();
  }

  // activeOf is the claim's active time so far, in whole milliseconds.
  function activeOf(a) {
    accrue();
    var c = claims[a.task.id];
    return c ? Math.round(c.activeMs) : 0;
  }

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

  // signedOut reports whether r says the session has ended: 401 (signed out
  // elsewhere, the editor's token replaced or disabled, expired) or 403
  // editor_disabled (the editor is disabled). The server has already ended
  // it and cleared its cookie; the page stops asking and shows the sign-in
  // form in place, rather than loading itself again.
  function signedOut(r) {
    var disabled = r.status === 403 && !!r.data && !!r.data.error && r.data.error.code === 'editor_disabled';
    if (r.status !== 401 && !disabled) { return false; }
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
    $('my-time').hidden = true;
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
      meID = r.data.id;
      capacity = r.data.capacity || 1;
      var t = r.data.today || {};
      $('today').textContent = 'today: ' + (t.submitted || 0) + ' submitted · ' + (t.skipped || 0) +
        ' skipped · ' + (t.released || 0) + ' released · ' + (t.expired || 0) + ' expired';
      refreshTime();
      return r.data;
    });
  }

  // --- the editor's own working time ---
  function hm(ms) {
    if (ms < 60000) { return Math.round(ms / 1000) + ' s'; }
    var m = Math.round(ms / 60000);
    if (m < 60) { return m + ' min'; }
    return Math.floor(m / 60) + ' h ' + (m % 60 < 10 ? '0' : '') + (m % 60) + ' min';
  }

  // refreshTime shows the editor's active time today and over 14 days, with
  // tasks per active hour and how many were sent back.
  function refreshTime() {
    return call('GET', '/me/time?days=14').then(function (r) {
      if (r.status !== 200 || !r.data) { return; }
      var d = r.data, t = d.total, today = d.daily.length ? d.daily[d.daily.length - 1] : { active_ms: 0, submitted: 0 };
      $('mt-today').textContent = hm(today.active_ms) + ' active, ' + today.submitted + ' task' + (today.submitted === 1 ? '' : 's');
      $('mt-window').textContent = hm(t.active_ms) + ' active, ' + t.submitted + ' task' + (t.submitted === 1 ? '' : 's') +
        (t.tasks_per_active_hour === null ? '' : ', ' + t.tasks_per_active_hour.toFixed(1) + ' per active hour') +
        (t.send_back_rate === null ? '' : ', ' + Math.round(t.send_back_rate * 100) + '% sent back');
      $('my-time').hidden = false;
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

  function setLease(c, iso) {
    c.leaseAt = Date.parse(iso) - skew;
    c.leaseSpan = Math.max(3000, c.leaseAt - now());
    c.nextBeat = now() + c.leaseSpan / 3;
  }

  // hold records the claim a (a new one, or a new fence of a task held) and
  // returns its state.
  function hold(a) {
    var c = claims[a.task.id];
    if (!c || c.a.fence !== a.fence) {
      c = { a: a, beating: false, holdLimited: false, draft: null, activeMs: 0 };
      // assignedAt, the server's time, orders the claims held: heldSince,
      // on this clock, moves with the skew measured at each answer.
      c.assignedAt = Date.parse(a.assigned_at);
      c.heldSince = c.assignedAt - skew;
      setLease(c, a.lease_expires_at);
      claims[a.task.id] = c;
    }
    c.a = a;
    return c;
  }

  function held() {
    return Object.keys(claims).map(function (k) { return claims[k]; })
      .sort(function (x, y) { return x.assignedAt - y.assignedAt || x.a.task.id - y.a.task.id; });
  }

  // reviewing reports whether a is at a stage after its first: a review,
  // which approves or sends back.
  function reviewing(a) {
    return !!(a && a.stages && a.stage && a.stages.indexOf(a.stage) > 0);
  }

  // editing reports whether a is at the first stage of a task with stages:
  // its editor submits the edited text, not a decision.
  function editing(a) {
    return !!(a && a.stages && a.stage && a.stages.length > 1 && a.stages.indexOf(a.stage) === 0);
  }

  // editedText is where an edit starts: the text of the task's latest
  // earlier result that has one (an edit sent back), else the payload's.
  function editedText(a) {
    var earlier = a.earlier || [];
    for (var i = earlier.length - 1; i >= 0; i--) {
      var r = earlier[i].result;
      if (r && typeof r.text === 'string') { return r.text; }
    }
    var p = a.task.payload;
    return p && typeof p.text === 'string' ? p.text : '';
  }

  // flow reports whether a has a workflow (stages or a group): its submit
  // carries the decision and notes beside the result.
  function flow(a) { return !!(a && (a.stages || a.group_id)); }

  function cap(s) { return s.charAt(0).toUpperCase() + s.slice(1); }

  // saveDraft keeps the decision and notes typed for the task shown, for
  // when the editor comes back to it, in the page and in the browser.
  function saveDraft() {
    if (!cur || !claims[cur.task.id]) { return; }
    claims[cur.task.id].draft = { notes: $('notes').value, decision: decision(), edited: $('edited').value };
    persistDraft();
  }

  function show(a) {
    var same = cur && cur.task.id === a.task.id && cur.fence === a.fence;
    if (!same) { saveDraft(); }
    generation++;
    cur = a;
    var c = hold(a);
    if (kept) { unkeep(); }
    $('t-title').textContent = a.task.title || '(untitled)';
    $('t-category').textContent = a.task.category;
    $('t-priority').textContent = String(a.task.priority);
    $('t-id').textContent = String(a.task.id);
    renderPayload(a.task.payload);
    renderFlow(a);
    if (!same) {
      // A new task starts from the default decision, so that a key pressed
      // out of habit never carries the last task's choice over to this one;
      // a task held before gets back what was typed for it, and so does
      // the claim held when the page was loaded again.
      var d = c.draft || storedDraft(a) || { notes: '', decision: 'approve', edited: editedText(a) };
      $('notes').value = d.notes;
      $('edited').value = editing(a) ? d.edited : '';
      var group = reviewing(a) ? 'review' : 'decision';
      var el = document.querySelector('input[name="' + group + '"][value="' + d.decision + '"]') ||
        document.querySelector('input[name="' + group + '"][value="approve"]');
      el.checked = true;
      $('notes').removeAttribute('aria-invalid');
      submitLabel();
      if (a.hedge) {
        // A hedge: the task is due soon and its first editor went quiet.
        notice('Also offered to another editor: task #' + a.task.id + ' is due soon and the editor who has it went quiet. The first to submit wins.', 'warn');
      }
    }
    hideReason();
    renderHeld();
    renderKept();
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
    accrue();
    if (!cur) { return; }
    var t = now();
    var c = claims[cur.task.id];
    $('t-held').textContent = clock(t - c.heldSince);
    var left = c.leaseAt - t;
    $('t-lease').textContent = clock(left);
    $('t-lease').className = left < c.leaseSpan / 4 ? 'warn' : '';
    // Every claim held is kept alive while the editor is present, the ones
    // not shown too.
    held().forEach(function (h) {
      if (!cur || claims[h.a.task.id] !== h) { return; }
      // A second's grace past the end covers the Date header's rounding,
      // so that the server has surely ended the claim too.
      if (h.leaseAt - t <= -1000) {
        lost(h.a, 'Your lease on task #' + h.a.task.id + ' ran out, so the task went back to the pool.', 'its lease ran out');
        return;
      }
      if (present() && !h.beating && !h.holdLimited && t >= h.nextBeat) { heartbeat(h); }
    });
  }

  function heartbeat(c) {
    var a = c.a;
    c.beating = true;
    call('POST', '/assignments/' + a.task.id + '/heartbeat', { fence: a.fence, active_ms: activeOf(a) }).then(function (r) {
      c.beating = false;
      if (claims[a.task.id] !== c) { return; }
      if (signedOut(r)) { return; }
      var shown = cur && cur.task.id === a.task.id;
      if (r.status === 200) { setLease(c, r.data.lease_expires_at); if (shown) { notice(''); } backoff = 1000; return; }
      if (r.status === 409 && r.data && r.data.error && r.data.error.code === 'hold_limit') {
        c.holdLimited = true;
        notice((shown ? 'This task' : 'Task #' + a.task.id) + ' has been held for the longest time allowed, so its lease can no longer be extended. Submit, skip or release it before the lease runs out.', 'warn');
        return;
      }
      if (r.status === 409 || r.status === 403 || r.status === 404) {
        refused(a, r);
        return;
      }
      // 503 or the network: try again soon, while the lease lasts.
      notice('The service is recovering; keeping your claim alive as soon as it is back.', 'warn');
      c.nextBeat = now() + Math.min(backoff, 5000);
      backoff = Math.min(backoff * 2, BACKOFF_MAX);
    });
  }

  // refused handles a refused write about the claim on a: a task the other
  // editor of a hedged task submitted first (done_by_other) stays on screen
  // with the draft; any other refusal means the claim is lost.
  function refused(a, r) {
    if (r.data && r.data.error && r.data.error.code === 'done_by_other') {
      doneByOther(a);
      return;
    }
    lost(a, lostText(a, r), lostReason(r));
  }

  // kept is a task done by someone else whose draft stays on screen until
  // the editor goes on (the submit button then says "Next task").
  var kept = null;

  // doneByOther keeps a task that another editor submitted first on screen,
  // with what the editor typed in the fields (it was not sent), until the
  // editor goes on with the submit button, now "Next task".
  function doneByOther(a) {
    keepLostDraft(a.task, a.fence, 'another editor submitted it first');
    delete claims[a.task.id];
    var text = 'Done by someone else: another editor submitted task #' + a.task.id + ' first, so your result was not kept.';
    if (!cur || cur.task.id !== a.task.id) {
      notice(text, 'bad');
      renderHeld();
      return;
    }
    generation++;
    cur = null;
    kept = a;
    // The clocks stop: the claim is over, whatever its lease said.
    $('t-lease').textContent = 'ended';
    $('t-lease').className = 'warn';
    notice(text + ' Your draft stays below: copy what you need, then press Next task.', 'bad');
    $('submit-label').textContent = 'Next task';
    $('b-skip').hidden = true;
    $('b-release').hidden = true;
    document.body.setAttribute('data-kept', String(a.task.id));
    renderHeld();
  }

  // unkeep ends the showing of a kept draft.
  function unkeep() {
    kept = null;
    document.body.removeAttribute('data-kept');
    $('b-skip').hidden = false;
    $('b-release').hidden = false;
  }

  // lostText says why the server refused a write about the claim on a: its
  // task was cancelled (task_cancelled), or the claim is gone otherwise.
  function lostText(a, r) {
    if (r.data && r.data.error && r.data.error.code === 'task_cancelled') {
      return 'Task #' + a.task.id + ' was cancelled by an operator while you held it; nothing you send about it is kept.';
    }
    return 'Your claim on task #' + a.task.id + ' was lost: ' + message(r);
  }

  // lostReason says in a few words why the server refused a write about a
  // claim, for the draft kept from it.
  function lostReason(r) {
    var code = r.data && r.data.error ? r.data.error.code : '';
    if (code === 'task_cancelled') { return 'an operator cancelled the task'; }
    if (code === 'stale_fence') { return 'it expired or was taken back'; }
    return message(r);
  }

  // lost says why the claim on a is gone and keeps what was typed for it
  // (reason: why, in a few words); when it is the task shown, it moves on
  // to another held or the next task.
  function lost(a, text, reason) {
    keepLostDraft(a.task, a.fence, reason || 'it ended');
    delete claims[a.task.id];
    if (!cur || cur.task.id !== a.task.id) {
      notice(text, 'bad');
      renderHeld();
      return;
    }
    notice(text + ' Moving on to the next task.', 'bad');
    cur = null;
    moveOn(null);
  }

  // moveOn shows next (a new assignment), else the oldest claim still held,
  // else waits for work.
  function moveOn(next) {
    if (next) { show(next); return; }
    var h = held();
    if (h.length) { show(h[0].a); return; }
    waitForWork();
  }

  // --- waiting for work ---
  function waitForWork() {
    generation++;
    var gen = generation;
    cur = null;
    claims = {};
    renderHeld();
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
    var el = document.querySelector((reviewing(cur) ? 'input[name="review"]' : 'input[name="decision"]') + ':checked');
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
          refused(a, r);
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
    if (!cur && kept) {
      // Done with a draft kept after a task done by someone else: go on.
      unkeep();
      notice('');
      moveOn(null);
      return;
    }
    if (!cur) { return; }
    var d = decision(), notes = $('notes').value;
    var body = { fence: cur.fence, result: { decision: d, notes: notes } };
    if (editing(cur)) {
      // The edit is the result; its notes go beside it, and it takes no
      // decision: the next stage decides.
      d = '';
      body.result = { text: $('edited').value };
      if (notes) { body.notes = notes; }
    } else if (flow(cur)) {
      // A send back tells the editor what to change: it needs notes.
      if (d === 'send_back' && !notes.trim()) {
        $('notes').setAttribute('aria-invalid', 'true');
        notice('Say what to change: a task is sent back with notes for its editor.', 'warn');
        $('notes').focus();
        return;
      }
      body.decision = d;
      if (notes) { body.notes = notes; }
    }
    var a = cur;
    body.active_ms = activeOf(a);
    act('submit', body, function (r) {
      forgetDraft(a);
      delete claims[a.task.id];
      if (cur && cur.task.id === a.task.id) { cur = null; }
      if (d === 'send_back') { notice('Task #' + a.task.id + ' was sent back to its ' + a.stages[a.stages.indexOf(a.stage) - 1] + ' stage.'); }
      moveOn(r.data && r.data.next);
      if (capacity > 1) { syncHeld(); }
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
    var a = cur;
    act('release', { fence: cur.fence, reason: $('reason').value, skip: reasonSkip, active_ms: activeOf(a) }, function () {
      forgetDraft(a);
      delete claims[a.task.id];
      cur = null;
      moveOn(null);
    });
  }

  // --- the workflow: stage, earlier results, review ---
  function fmtWhen(iso) {
    var d = new Date(iso);
    if (isNaN(d)) { return ''; }
    var pad = function (n) { return (n < 10 ? '0' : '') + n; };
    var t = pad(d.getHours()) + ':' + pad(d.getMinutes());
    return d.toDateString() === new Date().toDateString() ? t :
      d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + t;
  }

  // who names a result's editor: the editor itself as "you".
  function who(r) {
    if (r.editor_id && r.editor_id === meID) { return 'you'; }
    if (r.editor_name) { return r.editor_name; }
    if (r.editor_id) { return 'editor #' + r.editor_id; }
    return r.holder || 'someone';
  }

  var DECISIONS = { approve: 'approved', send_back: 'sent back', reject: 'rejected', escalate: 'escalated' };

  function renderFlow(a) {
    var staged = !!(a.stages && a.stage);
    var stage = $('t-stage');
    stage.hidden = !staged;
    stage.textContent = staged ? cap(a.stage) + ' · stage ' + (a.stages.indexOf(a.stage) + 1) + ' of ' + a.stages.length : '';
    var review = reviewing(a);
    $('review-decision').hidden = !review;
    $('review-decision').disabled = !review;
    // The edit stage takes the edited text; a review, approve or send back;
    // a task without stages, a decision.
    var edit = editing(a);
    $('edit-fields').hidden = !edit;
    var fs = document.querySelector('fieldset.decision:not(#review-decision)');
    fs.hidden = review || edit;
    fs.disabled = review || edit;
    // The footer's hint names the shortcuts of the choices shown.
    $('keys-choices').hidden = edit;
    var choices = (review ? $('review-decision') : fs).querySelectorAll('input[type="radio"]').length;
    $('keys-decision').textContent = choices > 1 ? 'Alt+1–' + choices : 'Alt+1';
    $('keys-decision-what').textContent = review ? 'review' : 'decision';
    $('notes-label').textContent = review ? 'Notes for the editor (needed to send back)' : 'Notes';
    if (flow(a)) { $('notes').setAttribute('maxlength', '4096'); } else { $('notes').removeAttribute('maxlength'); }

    var list = $('earlier-list');
    clear(list);
    var earlier = a.earlier || [];
    earlier.forEach(function (r) { list.appendChild(earlierItem(r)); });
    renderOlder(a, a.earlier_more ? a.earlier_before : '');
    $('t-earlier').hidden = !earlier.length;

    // A task sent back says so first, with the reviewer's notes.
    var last = earlier.length ? earlier[earlier.length - 1] : null;
    var sb = $('t-sent-back');
    if (staged && last && last.decision === 'send_back') {
      sb.textContent = 'Sent back by ' + who(last) + ' (' + (last.stage || 'review') + ', ' + fmtWhen(last.submitted_at) + ')' +
        (last.notes ? ': ' + last.notes : '.');
      sb.hidden = false;
    } else {
      sb.hidden = true;
      sb.textContent = '';
    }
  }

  // earlierItem is an earlier result: its stage, who and when, the decision,
  // the notes, and the result.
  function earlierItem(r) {
    var li = document.createElement('li');
    li.className = 'earlier-item' + (r.decision === 'send_back' ? ' sent-back' : '');
    var head = document.createElement('div');
    head.className = 'earlier-head';
    var b = document.createElement('b');
    b.textContent = r.stage ? cap(r.stage) : 'Result';
    head.appendChild(b);
    var by = document.createElement('span');
    by.className = 'muted';
    by.textContent = ' by ' + who(r) + ' · ' + fmtWhen(r.submitted_at);
    by.title = r.submitted_at;
    head.appendChild(by);
    if (r.decision) {
      var tag = document.createElement('span');
      tag.className = 'verdict ' + (r.decision === 'send_back' ? 'back' : r.decision === 'approve' ? 'ok' : '');
      tag.textContent = DECISIONS[r.decision] || r.decision;
      head.appendChild(tag);
    }
    li.appendChild(head);
    if (r.notes) {
      var q = document.createElement('p');
      q.className = 'earlier-notes';
      q.textContent = r.notes;
      li.appendChild(q);
    }
    li.appendChild(resultView(r));
    return li;
  }

  // renderOlder shows, when older earlier results exist (before is their
  // cursor), a button that reads the next older page of a's and puts it
  // above the ones shown.
  function renderOlder(a, before) {
    var btn = $('earlier-older');
    btn.hidden = !before;
    btn.disabled = false;
    btn.onclick = !before ? null : function () {
      btn.disabled = true;
      call('GET', '/assignments/' + a.task.id + '/earlier?fence=' + a.fence + '&before=' + encodeURIComponent(before)).then(function (r) {
        if (cur !== a) { return; } // another task is shown now
        if (r.status !== 200 || !r.data) {
          btn.disabled = false;
          btn.title = 'Could not read older results: ' + message(r);
          return;
        }
        var list = $('earlier-list');
        var first = list.firstChild;
        r.data.results.forEach(function (res) { list.insertBefore(earlierItem(res), first); });
        renderOlder(a, r.data.more ? r.data.before : '');
      });
    };
  }

  // resultView shows an earlier result: its fields, but for the decision
  // and notes already shown above it.
  function resultView(r) {
    var v = r.result;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      var dl = document.createElement('dl');
      dl.className = 'fields';
      Object.keys(v).forEach(function (k) {
        if ((k === 'decision' && v[k] === r.decision) || (k === 'notes' && (v[k] === r.notes || v[k] === ''))) { return; }
        var dt = document.createElement('dt'), dd = document.createElement('dd');
        dt.textContent = k;
        if (v[k] !== null && typeof v[k] === 'object') {
          var pre = document.createElement('pre');
          pre.textContent = fmtValue(v[k]);
          dd.appendChild(pre);
        } else {
          dd.textContent = v[k] === null ? 'null' : String(v[k]);
        }
        dl.appendChild(dt); dl.appendChild(dd);
      });
      return dl;
    }
    var p = document.createElement('pre');
    p.textContent = JSON.stringify(v, null, 2);
    return p;
  }

  function submitLabel() {
    var d = reviewing(cur) ? decision() : '';
    $('submit-label').textContent = d === 'send_back' ? 'Send back' : d === 'approve' ? 'Approve' : 'Submit';
  }

  // --- several claims ---
  function renderHeld() {
    var nav = $('held');
    var h = held();
    if (capacity <= 1 || !h.length) { nav.hidden = true; return; }
    $('held-count').textContent = 'Your tasks · ' + h.length + ' of ' + capacity;
    var list = $('held-list');
    clear(list);
    h.forEach(function (c) {
      var b = document.createElement('button');
      b.type = 'button';
      b.className = 'claim';
      b.setAttribute('data-task', String(c.a.task.id));
      var shown = cur && cur.task.id === c.a.task.id;
      b.setAttribute('aria-pressed', shown ? 'true' : 'false');
      b.textContent = '#' + c.a.task.id + ' ' + (c.a.task.title || '(untitled)') + (c.a.stage ? ' · ' + c.a.stage : '');
      b.title = b.textContent;
      b.addEventListener('click', function () { switchTo(c.a.task.id); });
      list.appendChild(b);
    });
    $('b-another').hidden = h.length >= capacity;
    nav.hidden = false;
  }

  function switchTo(id) {
    var c = claims[id];
    if (!c || busy || (cur && cur.task.id === id)) { return; }
    notice('');
    show(c.a);
  }

  // another claims one more task, below the editor's capacity.
  var asking = false;
  function another() {
    if (asking || busy || held().length >= capacity) { return; }
    asking = true;
    call('POST', '/assignments/next', {}).then(function (r) {
      asking = false;
      if (signedOut(r)) { return; }
      if (r.status === 200) {
        var known = !!claims[r.data.task.id];
        show(r.data);
        if (known) { notice('You hold as many tasks as you may; finish one to take another.'); }
        return;
      }
      if (r.status === 204) { notice('No other task is waiting right now.'); return; }
      notice('Cannot get work: ' + message(r), 'bad');
    });
  }

  // syncHeld reads the claims the editor holds, as the server sees them:
  // ones taken elsewhere join the list, ones gone leave it, and what was
  // typed for a claim no longer held is kept as ended for reason.
  function syncHeld(reason) {
    return call('GET', '/assignments').then(function (r) {
      if (signedOut(r) || r.status !== 200) { return; }
      capacity = r.data.capacity || capacity;
      var seen = {};
      r.data.assignments.forEach(function (a) { seen[a.task.id] = true; hold(a); });
      Object.keys(claims).forEach(function (k) {
        if (!seen[k] && (!cur || String(cur.task.id) !== k)) { delete claims[k]; }
      });
      endDrafts(r.data.assignments, reason || 'it ended elsewhere');
      if (!cur) { moveOn(null); return; }
      renderHeld();
    });
  }

  // --- drafts kept in this browser ---
  // What the editor types for a claim (the decision, the notes, the edited
  // text) is kept in this browser's localStorage as it is typed, under the
  // editor, the task and the claim's fence, so that two editors of one
  // browser never read each other's. A reload while the claim lives puts it
  // back into the form. A claim that ends first (its lease ran out, it was
  // taken back or cancelled, a heartbeat or submit was refused, or it ended
  // while the page was closed) shows it above the task, to copy, rather than
  // dropping it; when the same editor holds that task again under a new
  // claim, at the same stage, it may put it back into the form. A draft goes
  // after its submit, skip or release, when dismissed, at sign out, and
  // DRAFT_TTL after it was last typed in. Nothing about drafts is sent to
  // the server.
  var DRAFT_PREFIX = 'taskd.draft.v1.'; // + editor id + '.' + task id + '.' + fence
  var DRAFT_TTL = 7 * 24 * 3600 * 1000;
  var DRAFT_SAVE_MS = 400;             // saved this long after the last keystroke
  var draftTimer = 0;
  var keptShown = '';                  // what renderKept last drew
  var draftWarned = false;             // the editor was told a draft could not be kept

  // draftStorage is the browser's localStorage, or null where the browser
  // refuses it (its settings, a sandbox): then nothing is kept.
  function draftStorage() {
    try { return window.localStorage; } catch (e) { return null; }
  }

  function draftKey(task, fence) { return DRAFT_PREFIX + meID + '.' + task + '.' + fence; }

  function parseDraft(text) {
    try {
      var d = JSON.parse(text);
      return d && typeof d === 'object' && typeof d.saved === 'number' ? d : null;
    } catch (e) { return null; }
  }

  // readDraft returns the editor's draft of the claim (task, fence), or null.
  function readDraft(task, fence) {
    var st = draftStorage();
    if (!st || !meID) { return null; }
    try {
      var d = parseDraft(st.getItem(draftKey(task, fence)));
      return d && d.editor === meID && now() - d.saved < DRAFT_TTL ? d : null;
    } catch (e) { return null; }
  }

  // writeDraft stores d; when the storage is full it drops the expired drafts
  // and tries once more. It reports whether d was stored.
  function writeDraft(d) {
    var st = draftStorage();
    if (!st || !meID) { return false; }
    for (var i = 0; i < 2; i++) {
      try { st.setItem(draftKey(d.task, d.fence), JSON.stringify(d)); return true; } catch (e) { sweepDrafts(); }
    }
    return false;
  }

  function dropDraft(task, fence) {
    var st = draftStorage();
    if (!st || !meID) { return; }
    try { st.removeItem(draftKey(task, fence)); } catch (e) { /* nothing was kept */ }
  }

  // draftKeys lists the keys of the stored drafts whose keys start with
  // prefix.
  function draftKeys(st, prefix) {
    var keys = [];
    for (var i = 0; i < st.length; i++) {
      var k = st.key(i);
      if (k && k.indexOf(prefix) === 0) { keys.push(k); }
    }
    return keys;
  }

  // myDrafts returns the editor's unexpired drafts, oldest first.
  function myDrafts() {
    var st = draftStorage(), out = [];
    if (!st || !meID) { return out; }
    try {
      draftKeys(st, DRAFT_PREFIX + meID + '.').forEach(function (k) {
        var d = parseDraft(st.getItem(k));
        if (d && d.editor === meID && now() - d.saved < DRAFT_TTL) { out.push(d); }
      });
    } catch (e) { /* as far as it could be read */ }
    return out.sort(function (x, y) { return x.saved - y.saved; });
  }

  // sweepDrafts removes every editor's drafts typed in more than DRAFT_TTL
  // ago, and anything under the prefix that is not a draft.
  function sweepDrafts() {
    var st = draftStorage();
    if (!st) { return; }
    try {
      draftKeys(st, DRAFT_PREFIX).forEach(function (k) {
        var d = parseDraft(st.getItem(k));
        if (!d || now() - d.saved >= DRAFT_TTL) { st.removeItem(k); }
      });
    } catch (e) { /* the next load tries again */ }
  }

  // inputOf names what a's form takes: the edited text ('edit'), approve or
  // send back ('review'), or a decision.
  function inputOf(a) { return editing(a) ? 'edit' : reviewing(a) ? 'review' : 'decision'; }

  // persistDraft stores what the form holds for the claim shown, or removes
  // its draft when nothing is typed there (empty notes and the edited text
  // as it started): a decision alone is not kept.
  function persistDraft() {
    clearTimeout(draftTimer);
    draftTimer = 0;
    if (!cur || !meID || !claims[cur.task.id]) { return; }
    var input = inputOf(cur), edited = $('edited').value;
    var d = {
      editor: meID, task: cur.task.id, fence: cur.fence, title: cur.task.title || '',
      category: cur.task.category, stage: cur.stage || '', input: input,
      decision: input === 'edit' ? '' : decision(), notes: $('notes').value,
      edited: input === 'edit' && edited !== editedText(cur) ? edited : null,
      saved: now(), lost: null
    };
    if (!d.notes.trim() && d.edited === null) { dropDraft(d.task, d.fence); return; }
    if (!writeDraft(d) && !draftWarned) {
      draftWarned = true; // once a page: the editor keeps typing
      notice('This browser could not keep what you typed (its storage is full or turned off): hand it in before you leave.', 'warn');
    }
  }

  function scheduleDraft() {
    clearTimeout(draftTimer);
    draftTimer = setTimeout(persistDraft, DRAFT_SAVE_MS);
  }

  // forgetDraft removes the draft of the claim a, handed in or given back.
  function forgetDraft(a) {
    clearTimeout(draftTimer);
    draftTimer = 0;
    dropDraft(a.task.id, a.fence);
  }

  // storedDraft returns, in the form's terms, what was typed for the live
  // claim a and kept, or null.
  function storedDraft(a) {
    var d = readDraft(a.task.id, a.fence);
    if (!d || d.lost || d.input !== inputOf(a)) { return null; }
    return { notes: d.notes || '', decision: d.decision || 'approve', edited: typeof d.edited === 'string' ? d.edited : editedText(a) };
  }

  // keepLostDraft keeps what the editor typed for its claim on task (an
  // assignment's task) under fence, which ended for reason (a few words:
  // "its lease ran out"), and shows it above the task with that reason, to
  // copy. Call it while the page still holds the claim (and shows it, if it
  // did): what the form holds is stored first. It reports whether anything
  // typed was kept.
  function keepLostDraft(task, fence, reason) {
    if (cur && cur.task.id === task.id && cur.fence === fence) { persistDraft(); }
    var d = readDraft(task.id, fence);
    if (!d) { return false; }
    if (!d.lost) {
      d.lost = { reason: reason, at: now() };
      writeDraft(d);
    }
    renderKept();
    return true;
  }

  // endDrafts keeps, as ended for reason, the editor's drafts of claims that
  // are neither among assignments (the claims the server says it holds) nor
  // held by this page.
  function endDrafts(assignments, reason) {
    var live = {};
    assignments.forEach(function (a) { live[a.task.id + '.' + a.fence] = true; });
    Object.keys(claims).forEach(function (k) { live[k + '.' + claims[k].a.fence] = true; });
    myDrafts().forEach(function (d) {
      if (d.lost || live[d.task + '.' + d.fence]) { return; }
      d.lost = { reason: reason, at: now() };
      writeDraft(d);
    });
    renderKept();
  }

  // canPutBack reports whether the lost draft d may go into the form shown:
  // the editor holds its task again, under a new claim, at the same stage.
  function canPutBack(d) {
    return !!(cur && claims[cur.task.id] && cur.task.id === d.task && cur.fence !== d.fence &&
      inputOf(cur) === d.input && (cur.stage || '') === d.stage);
  }

  var CHOICES = { approve: 'Approve', reject: 'Reject', escalate: 'Escalate', send_back: 'Send back' };

  // renderKept shows the editor's drafts of ended claims, newest first.
  function renderKept() {
    var kept = myDrafts().filter(function (d) { return d.lost; }).reverse();
    var key = kept.map(function (d) { return d.task + '.' + d.fence + (canPutBack(d) ? '+' : ''); }).join(',');
    if (key === keptShown) { return; } // unchanged: keep the selection made in it
    keptShown = key;
    var box = $('drafts');
    clear(box);
    kept.forEach(function (d) { box.appendChild(keptItem(d)); });
    box.hidden = !kept.length;
  }

  function keptItem(d) {
    var sec = document.createElement('section');
    sec.className = 'card draft-kept';
    sec.setAttribute('data-task', String(d.task));
    sec.setAttribute('data-fence', String(d.fence));
    var h = document.createElement('h2');
    h.setAttribute('role', 'alert');
    h.textContent = 'Your claim on task #' + d.task + ' ended (' + d.lost.reason + '). Your unfinished text is kept below: copy it.';
    sec.appendChild(h);
    var meta = document.createElement('p');
    meta.className = 'muted small';
    meta.textContent = (d.title ? '“' + d.title + '” · ' : '') + d.category + (d.stage ? ' · ' + d.stage + ' stage' : '') +
      ' · typed ' + fmtWhen(new Date(d.saved).toISOString()) + '. Kept in this browser only, until you dismiss it (at most 7 days).';
    sec.appendChild(meta);
    if (typeof d.edited === 'string') { sec.appendChild(keptField(d, 'edited', 'Edited text', d.edited, 8)); }
    if (d.input !== 'edit' && d.decision) {
      var p = document.createElement('p');
      p.className = 'kept-decision';
      p.textContent = 'Your choice: ' + (CHOICES[d.decision] || d.decision);
      sec.appendChild(p);
    }
    if (d.notes && d.notes.trim()) { sec.appendChild(keptField(d, 'notes', 'Notes', d.notes, 3)); }
    var acts = document.createElement('div');
    acts.className = 'actions';
    if (canPutBack(d)) {
      var offer = document.createElement('p');
      offer.className = 'kept-offer';
      offer.textContent = 'You hold task #' + d.task + ' again, under a new claim: put this text back into its form if it still applies.';
      sec.appendChild(offer);
      acts.appendChild(keptButton('Put back into the form', 'put-back', function () { putBack(d); }, true));
    }
    acts.appendChild(keptButton('Dismiss', 'dismiss', function () { dropDraft(d.task, d.fence); renderKept(); }, false));
    sec.appendChild(acts);
    return sec;
  }

  function keptButton(text, act, onClick, primary) {
    var b = document.createElement('button');
    b.type = 'button';
    b.textContent = text;
    b.setAttribute('data-act', act);
    if (primary) { b.className = 'primary'; }
    b.addEventListener('click', onClick);
    return b;
  }

  // keptField is a kept text, read-only (it can be selected), and a button
  // that copies it.
  function keptField(d, name, label, text, rows) {
    var div = document.createElement('div');
    div.className = 'kept-field';
    var id = 'kept-' + d.task + '-' + d.fence + '-' + name;
    var l = document.createElement('label');
    l.setAttribute('for', id);
    l.textContent = label;
    var ta = document.createElement('textarea');
    ta.id = id;
    ta.readOnly = true;
    // As tall as the text, about, up to rows lines: it scrolls past them.
    ta.rows = Math.min(rows, text.split('\n').reduce(function (n, line) { return n + 1 + Math.floor(line.length / 70); }, 1));
    ta.value = text;
    ta.setAttribute('data-field', name);
    var b = keptButton('Copy ' + label.toLowerCase(), 'copy', function () { copyKept(ta, b, label); }, false);
    div.appendChild(l);
    div.appendChild(ta);
    div.appendChild(b);
    return div;
  }

  // copyKept copies the text of ta to the clipboard; where the browser
  // refuses, the text is left selected for the editor to copy.
  function copyKept(ta, btn, label) {
    var said = function (ok) { btn.textContent = ok ? 'Copied' : 'Selected: copy it with your keyboard or menu'; };
    ta.focus();
    ta.select();
    var legacy = function () {
      ta.select();
      try { return document.execCommand('copy'); } catch (e) { return false; }
    };
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(ta.value).then(function () { said(true); }, function () { said(legacy()); });
    } else {
      said(legacy());
    }
    setTimeout(function () { btn.textContent = 'Copy ' + label.toLowerCase(); }, 4000);
  }

  // putBack fills the form of the claim shown with the lost draft d, which
  // then becomes that claim's draft.
  function putBack(d) {
    if (!canPutBack(d)) { renderKept(); return; }
    if (typeof d.edited === 'string') { $('edited').value = d.edited; }
    $('notes').value = d.notes || '';
    if (d.input !== 'edit' && d.decision) {
      var el = document.querySelector('input[name="' + (d.input === 'review' ? 'review' : 'decision') + '"][value="' + d.decision + '"]');
      if (el) { el.checked = true; }
      submitLabel();
    }
    dropDraft(d.task, d.fence);
    persistDraft();
    renderKept();
    $(typeof d.edited === 'string' ? 'edited' : 'notes').focus();
  }

  // dropMyDrafts removes every draft of the editor (at sign out).
  function dropMyDrafts() {
    myDrafts().forEach(function (d) { dropDraft(d.task, d.fence); });
  }

  // --- instructions held back ---
  // instructionsPending tells the instructions panel (instructions.js) at
  // once that an answer left out categories whose instructions the editor
  // has yet to confirm (header, Taskd-Instructions-Pending: the names
  // percent-encoded as in a query string, separated by commas), so that it
  // asks for the confirmation now rather than at its next periodic reading.
  function instructionsPending(header) {
    var cats = header.split(',').map(function (c) {
      try { return decodeURIComponent(c.replace(/\+/g, ' ')); } catch (e) { return c; }
    });
    document.dispatchEvent(new CustomEvent('taskd:instructions-pending', { detail: { categories: cats } }));
  }

  // Drafts: saved as typed, at once when the page is hidden or left, shown
  // again when another tab of this browser keeps or dismisses one, and
  // removed at sign out.
  $('submit-form').addEventListener('input', scheduleDraft);
  $('submit-form').addEventListener('change', scheduleDraft);
  window.addEventListener('pagehide', function () { if (draftTimer) { persistDraft(); } });
  document.addEventListener('visibilitychange', function () { if (document.hidden && draftTimer) { persistDraft(); } });
  window.addEventListener('storage', function (e) { if (!e.key || e.key.indexOf(DRAFT_PREFIX) === 0) { renderKept(); } });
  document.querySelector('form.signout').addEventListener('submit', dropMyDrafts);

  // --- wiring ---
  ['keydown', 'pointerdown', 'pointermove', 'wheel', 'touchstart', 'input'].forEach(function (ev) {
    document.addEventListener(ev, function () { lastInput = now(); }, { passive: true, capture: true });
  });
  document.addEventListener('visibilitychange', function () { if (!document.hidden) { tick(); } else { accrue(); } });

  $('submit-form').addEventListener('submit', function (e) { e.preventDefault(); submit(); });
  $('review-decision').addEventListener('change', submitLabel);
  $('notes').addEventListener('input', function () {
    if ($('notes').getAttribute('aria-invalid') === 'true' && $('notes').value.trim()) {
      $('notes').removeAttribute('aria-invalid');
      notice('');
    }
  });
  $('b-another').addEventListener('click', another);
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
    var review = reviewing(cur);
    if (editing(cur) && e.code !== 'KeyS' && e.code !== 'KeyR' && e.code !== 'KeyN') { return; }
    var map = review ? { Digit1: 'approve', Digit2: 'send_back' } : { Digit1: 'approve', Digit2: 'reject', Digit3: 'escalate' };
    if (e.code === 'KeyS') { e.preventDefault(); askReason(true); }
    else if (e.code === 'KeyR') { e.preventDefault(); askReason(false); }
    else if (e.code === 'KeyN' && capacity > 1) { e.preventDefault(); another(); }
    else if (map[e.code]) {
      e.preventDefault();
      var el = document.querySelector('input[name="' + (review ? 'review' : 'decision') + '"][value="' + map[e.code] + '"]');
      if (el) { el.checked = true; submitLabel(); }
    }
  });

  // Instructions confirmed (instructions.js): a wait that left their
  // category out starts again with it.
  document.addEventListener('taskd:instructions-confirmed', function () {
    if (!cur && !ended) { waitForWork(); }
  });

  setInterval(tick, 1000);
  refreshMe().then(function (me) {
    sweepDrafts();
    var closed = 'it ended while this page was closed';
    if (me && me.capacity > 1) { syncHeld(closed); return; }
    if (me) { endDrafts(me.assignment ? [me.assignment] : [], closed); }
    if (me && me.assignment) { show(me.assignment); } else { waitForWork(); }
  });
}());
