// The ops console: the pool by status and category (and stage, for the
// categories with stages), its last hour, the live claims, a task browser
// (with a task's stages, every stage's results and its group's progress)
// and the editors (with their capacity and stage limits), over the API's
// admin routes under
// /ops/v1. It refreshes the view on screen every few seconds while the tab is
// visible, and not while the operator is typing or confirming. Everything from
// the server is written with textContent or setAttribute, never as HTML; the
// charts are SVG elements made here.
(function () {
  'use strict';

  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute('content');
  // telemetry.trace_url: a trace's address in the tracing backend, {trace_id} in it; empty: no links.
  var traceURL = document.querySelector('meta[name="trace-url"]').getAttribute('content') || '';
  var $ = function (id) { return document.getElementById(id); };
  var SVG = 'http://www.w3.org/2000/svg';
  var REFRESH_MS = 5000;
  var NAMES_MS = 30000;
  var STATUSES = ['pending', 'assigned', 'done', 'dead', 'cancelled'];

  var skew = 0;          // server clock minus ours, from the Date header
  var view = 'pool';
  var armed = 0;         // confirm buttons waiting for their second press
  var names = {};        // editor id → name
  var namesAt = 0;
  var taskPages = [''];  // cursors of the task pages seen; the last is shown
  var taskNext = null;
  var taskFilter = {};
  var taskOpen = 0;      // the task shown in the detail, or 0
  var hist = { task: 0, events: [], before: null }; // the detail's audit trail: events oldest first, and the cursor of older ones
  var editorPages = [''];
  var editorNext = null;
  var editorOpen = 0;

  function now() { return Date.now(); }

  // --- calls ---
  function call(method, path, body) {
    var opts = { method: method, headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin' };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch('/ops/v1' + path, opts).then(function (res) {
      var d = Date.parse(res.headers.get('Date') || '');
      if (!isNaN(d)) { skew = d - now(); }
      if (res.status === 401) { window.location.assign('/ops'); }
      if (res.status === 204) { return { status: 204, data: null }; }
      return res.json().then(function (data) { return { status: res.status, data: data }; },
        function () { return { status: res.status, data: null }; });
    }, function () { return { status: 0, data: null }; });
  }

  function message(r) {
    return r.data && r.data.error && r.data.error.message ? r.data.error.message : 'status ' + r.status;
  }

  function notice(text, kind) {
    var el = $('status');
    if (!text) { el.hidden = true; el.textContent = ''; return; }
    el.textContent = text;
    el.className = 'notice' + (kind ? ' ' + kind : '');
    el.hidden = false;
  }

  // ok reports whether r is a success; otherwise it says what went wrong.
  function ok(r, what) {
    if (r.status >= 200 && r.status < 300) { return true; }
    if (r.status === 401) { return false; }
    if (r.status === 0 || r.status === 503) {
      notice('The service is recovering; the console tries again every ' + REFRESH_MS / 1000 + ' s.', 'warn');
    } else {
      notice(what + ': ' + message(r), 'bad');
    }
    return false;
  }

  // --- elements ---
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) { Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); }); }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  function svg(tag, attrs, title) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (title) { var t = document.createElementNS(SVG, 'title'); t.textContent = title; e.appendChild(t); }
    return e;
  }

  function clear(e) { while (e.firstChild) { e.removeChild(e.firstChild); } }

  function td(text, cls) { return el('td', cls ? { 'class': cls } : null, text); }

  function num(n, cls) { return el('td', { 'class': 'num' + (n === 0 ? ' zero' : '') + (cls ? ' ' + cls : '') }, n); }

  function link(href, text, label) {
    var a = el('a', { href: href }, text);
    if (label) { a.setAttribute('aria-label', label); }
    return a;
  }

  // replaceRows swaps a table body's rows, keeping the focus on the control
  // with the same data-key, so that a refresh does not throw a keyboard user
  // out of the table.
  function replaceRows(tbody, rows) {
    var active = document.activeElement;
    var key = active && tbody.contains(active) ? active.getAttribute('data-key') : null;
    clear(tbody);
    rows.forEach(function (r) { tbody.appendChild(r); });
    if (key) {
      var again = tbody.querySelector('[data-key="' + CSS.escape(key) + '"]');
      if (again) { again.focus(); }
    }
  }

  // confirmButton is a button that asks for a second press before action
  // runs, for what cannot be undone; the question lapses after 4 s.
  function confirmButton(label, question, aria, key, action) {
    var b = el('button', { type: 'button', 'aria-label': aria, 'data-key': key }, label);
    var timer = null;
    var disarm = function () {
      if (!b.classList.contains('armed')) { return; }
      b.classList.remove('armed');
      b.textContent = label;
      b.setAttribute('aria-label', aria);
      clearTimeout(timer);
      armed--;
    };
    b.addEventListener('click', function () {
      if (!b.classList.contains('armed')) {
        armed++;
        b.classList.add('armed');
        b.textContent = question;
        b.setAttribute('aria-label', question + ' ' + aria);
        timer = setTimeout(disarm, 4000);
        return;
      }
      disarm();
      b.disabled = true;
      action().then(function () { b.disabled = false; });
    });
    b.addEventListener('blur', function () { setTimeout(disarm, 300); });
    return b;
  }

  // --- time ---
  function pad(n) { return (n < 10 ? '0' : '') + n; }

  function fmtTime(iso) {
    if (!iso) { return '–'; }
    var d = new Date(iso);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  function fmtClock(iso) {
    var d = new Date(iso);
    return pad(d.getHours()) + ':' + pad(d.getMinutes());
  }

  function fmtAge(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) { return s + 's'; }
    var m = Math.floor(s / 60);
    if (m < 60) { return m + 'm ' + pad(s % 60) + 's'; }
    var h = Math.floor(m / 60);
    if (h < 48) { return h + 'h ' + pad(m % 60) + 'm'; }
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }

  function fmtBytes(n) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 || n >= 100 ? Math.round(n) : n.toFixed(1)) + ' ' + units[i];
  }

  function fmtLeft(ms) {
    if (ms <= 0) { return 'expired'; }
    var s = Math.ceil(ms / 1000);
    return Math.floor(s / 60) + ':' + pad(s % 60);
  }

  // count is n and its noun, singular for one: count(1, 'claim') is
  // "1 claim", count(0, 'claim') "0 claims".
  function count(n, noun) {
    return n + ' ' + noun + (n === 1 ? '' : 's');
  }

  function fmtMS(v) {
    if (v === null || v === undefined) { return '–'; }
    if (v < 10) { return v.toFixed(2) + ' ms'; }
    if (v < 1000) { return Math.round(v) + ' ms'; }
    return (v / 1000).toFixed(2) + ' s';
  }

  function serverNow() { return now() + skew; }

  // ticking makes a cell that counts, every second: up from since, or down
  // to a deadline.
  function ticking(iso, down) {
    var c = el('td', { 'class': 'num' + (down ? ' lease' : '') });
    c.setAttribute(down ? 'data-deadline' : 'data-since', iso || '');
    tickCell(c);
    return c;
  }

  function tickCell(c) {
    var d = c.getAttribute('data-deadline');
    if (d !== null) {
      var left = Date.parse(d) - serverNow();
      c.textContent = d ? fmtLeft(left) : '–';
      c.classList.toggle('low', d !== '' && left < 10000);
      return;
    }
    var s = c.getAttribute('data-since');
    c.textContent = s ? fmtAge(serverNow() - Date.parse(s)) : '–';
  }

  function tick() {
    document.querySelectorAll('[data-deadline], [data-since]').forEach(tickCell);
  }

  // --- editors' names ---
  function loadNames(force) {
    if (!force && now() - namesAt < NAMES_MS) { return Promise.resolve(); }
    return call('GET', '/editors?limit=500').then(function (r) {
      if (r.status !== 200) { return; }
      namesAt = now();
      names = {};
      r.data.editors.forEach(function (e) { names[e.id] = e.name; });
      var sel = $('f-editor'), keep = sel.value;
      while (sel.options.length > 1) { sel.remove(1); }
      r.data.editors.forEach(function (e) { sel.appendChild(el('option', { value: 'editor:' + e.id }, e.name + ' (#' + e.id + ')')); });
      sel.value = keep;
    });
  }

  // holderName names a holder: an editor by its name, a worker by its id.
  function holderName(holder) {
    if (!holder) { return '–'; }
    var m = /^editor:(\d+)$/.exec(holder);
    if (!m) { return holder; }
    return names[m[1]] !== undefined ? names[m[1]] : 'editor #' + m[1];
  }

  function holderCell(holder, cls) {
    var c = el('td', cls ? { 'class': cls } : null);
    var m = /^editor:(\d+)$/.exec(holder || '');
    if (m) { c.appendChild(link('#editors/' + m[1], holderName(holder))); } else { c.textContent = holderName(holder); }
    return c;
  }

  // --- the pool ---
  function loadPool() {
    return Promise.all([
      call('GET', '/stats'),
      call('GET', '/stats/history?minutes=60'),
      call('GET', '/tasks?status=assigned&order=oldest&limit=200'),
      loadNames(false)
    ]).then(function (rs) {
      var good = ok(rs[0], 'Pool') & ok(rs[1], 'History') & ok(rs[2], 'Claims');
      if (rs[0].status === 200) { renderPool(rs[0].data); }
      if (rs[1].status === 200) { renderHistory(rs[1].data); }
      if (rs[2].status === 200) { renderClaims(rs[2].data, rs[0].data); }
      return !!good;
    });
  }

  function renderPool(st) {
    var paused = {};
    (st.paused || []).forEach(function (c) { paused[c] = true; });
    var cats = Object.keys(st.by_category || {});
    Object.keys(paused).forEach(function (c) { if (cats.indexOf(c) < 0) { cats.push(c); } });
    cats.sort();
    var rows = cats.map(function (cat) {
      var counts = (st.by_category || {})[cat] || {};
      var tr = el('tr', { 'data-category': cat });
      var name = el('th', { scope: 'row' }, cat);
      if (paused[cat]) { name.appendChild(el('span', { 'class': 'tag paused' }, 'paused')); }
      tr.appendChild(name);
      STATUSES.forEach(function (s) {
        var c = num(counts[s] || 0, s === 'cancelled' ? 'hide-phone' : '');
        c.setAttribute('data-status', s);
        tr.appendChild(c);
      });
      var act = el('td', { 'class': 'act' });
      var op = paused[cat] ? 'resume' : 'pause';
      var b = el('button', { type: 'button', 'data-key': op + ':' + cat, 'aria-label': (paused[cat] ? 'Resume ' : 'Pause ') + cat },
        paused[cat] ? 'Resume' : 'Pause');
      b.addEventListener('click', function () { setPaused(cat, op, b); });
      act.appendChild(b);
      tr.appendChild(act);
      return [tr].concat(stageRows(cat, (st.by_stage || {})[cat]));
    });
    replaceRows($('pool-table').tBodies[0], [].concat.apply([], rows));
    var foot = el('tr');
    foot.appendChild(td('all'));
    STATUSES.forEach(function (s) { foot.appendChild(num((st.by_status || {})[s] || 0, s === 'cancelled' ? 'hide-phone' : '')); });
    foot.appendChild(td(''));
    replaceRows($('pool-table').tFoot, [foot]);

    var k = $('pool-kpis');
    clear(k);
    var kpi = function (label, value) {
      var s = el('span', null, label + ' ');
      s.appendChild(el('b', null, value));
      k.appendChild(s);
    };
    kpi('holders', st.holders);
    kpi('expiring within ' + Math.round(st.expiring_within_ms / 1000) + ' s', st.expiring_soon);
    kpi('expired, not yet swept', st.expired);
    kpi('paused', (st.paused || []).length);
    if (st.webhooks) { kpi('webhook backlog', st.webhooks.backlog); }
    renderStorage(st.storage);
  }

  // renderStorage shows what the finished data takes: each purged table's
  // size and rows, and the age of the oldest finished task kept by status.
  function renderStorage(sto) {
    var t = $('storage-table');
    t.hidden = !sto;
    if (!sto) { return; }
    replaceRows(t.tBodies[0], (sto.tables || []).map(function (x) {
      var tr = el('tr', { 'data-table': x.name });
      tr.appendChild(el('th', { scope: 'row' }, x.name));
      tr.appendChild(el('td', { 'class': 'num' }, fmtBytes(x.bytes)));
      tr.appendChild(num(x.rows));
      return tr;
    }));
    var k = $('storage-kpis');
    clear(k);
    ['done', 'cancelled', 'dead'].forEach(function (s) {
      var age = (sto.oldest_finished_ms || {})[s];
      var span = el('span', { 'data-status': s }, 'oldest ' + s + ' ');
      span.appendChild(el('b', null, age === undefined ? '–' : fmtAge(age)));
      k.appendChild(span);
    });
  }

  // stageRows are a category's counts by stage, under its row, for a
  // category with tasks at stages.
  function stageRows(cat, stages) {
    if (!stages) { return []; }
    return Object.keys(stages).map(function (stage) {
      var counts = stages[stage] || {};
      var tr = el('tr', { 'class': 'stage-row', 'data-stage-of': cat, 'data-stage': stage });
      var name = el('th', { scope: 'row' });
      name.appendChild(el('span', { 'class': 'sr-only' }, cat + ' at '));
      name.appendChild(document.createTextNode(stage));
      tr.appendChild(name);
      STATUSES.forEach(function (s) {
        var c = num(counts[s] || 0, s === 'cancelled' ? 'hide-phone' : '');
        c.setAttribute('data-status', s);
        tr.appendChild(c);
      });
      tr.appendChild(td(''));
      return tr;
    });
  }

  function setPaused(cat, op, b) {
    b.disabled = true;
    return call('POST', '/admin/categories/' + encodeURIComponent(cat) + '/' + op, {}).then(function (r) {
      b.disabled = false;
      if (!ok(r, (op === 'pause' ? 'Pause ' : 'Resume ') + cat)) { return; }
      notice((op === 'pause' ? 'Paused ' : 'Resumed ') + cat + (r.data.changed ? '.' : ' (it already was).'));
      return loadPool();
    });
  }

  // niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
  function niceMax(v) {
    if (v <= 0) { return 1; }
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var f = v / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  var W = 600, H = 120, TOP = 6;

  function renderHistory(h) {
    var ms = h.minutes, n = ms.length;
    var bw = W / n;
    var y = function (v, max) { return (H - (v / max) * (H - TOP)).toFixed(1); };

    // Claims as bars, submits as a line.
    var rate = $('chart-rate');
    clear(rate);
    var rmax = niceMax(Math.max.apply(null, ms.map(function (m) { return Math.max(m.claims, m.submits); }).concat([1])));
    rate.appendChild(svg('line', { 'class': 'grid', x1: 0, x2: W, y1: y(rmax / 2, rmax), y2: y(rmax / 2, rmax), 'vector-effect': 'non-scaling-stroke' }));
    var pts = [];
    ms.forEach(function (m, i) {
      if (m.claims > 0) {
        rate.appendChild(svg('rect', { 'class': 'bar-claims', x: (i * bw + 0.5).toFixed(1), width: Math.max(bw - 1, 0.5).toFixed(1), y: y(m.claims, rmax), height: (H - y(m.claims, rmax)).toFixed(1) }));
      }
      pts.push((i * bw + bw / 2).toFixed(1) + ',' + y(m.submits, rmax));
    });
    rate.appendChild(svg('polyline', { 'class': 'line-submits', points: pts.join(' '), 'vector-effect': 'non-scaling-stroke' }));
    ms.forEach(function (m, i) {
      rate.appendChild(svg('rect', { 'class': 'hit', x: (i * bw).toFixed(1), width: bw.toFixed(1), y: 0, height: H },
        fmtClock(m.start) + ': ' + count(m.claims, 'claim') + ', ' + count(m.submits, 'submit')));
    });
    $('rate-max').textContent = '(top: ' + rmax + '/min)';

    // p50 and p99 as lines, broken where a minute had no claims.
    var lat = $('chart-latency');
    clear(lat);
    var lmax = niceMax(Math.max.apply(null, ms.map(function (m) { return m.next_p99_ms || 0; }).concat([0.001])));
    lat.appendChild(svg('line', { 'class': 'grid', x1: 0, x2: W, y1: y(lmax / 2, lmax), y2: y(lmax / 2, lmax), 'vector-effect': 'non-scaling-stroke' }));
    ['p50', 'p99'].forEach(function (q) {
      var d = '', pen = 'M';
      ms.forEach(function (m, i) {
        var v = m['next_' + q + '_ms'];
        if (v === null) { pen = 'M'; return; }
        var x = i * bw + bw / 2;
        // A lone minute is a short dash, so that it shows.
        d += pen + (x - bw / 3).toFixed(1) + ' ' + y(v, lmax) + ' L' + (x + bw / 3).toFixed(1) + ' ' + y(v, lmax) + ' ';
        pen = 'L';
      });
      if (d) { lat.appendChild(svg('path', { 'class': 'line-' + q, d: d, 'vector-effect': 'non-scaling-stroke' })); }
    });
    ms.forEach(function (m, i) {
      lat.appendChild(svg('rect', { 'class': 'hit', x: (i * bw).toFixed(1), width: bw.toFixed(1), y: 0, height: H },
        fmtClock(m.start) + ': p50 ' + fmtMS(m.next_p50_ms) + ', p99 ' + fmtMS(m.next_p99_ms)));
    });
    $('lat-max').textContent = h.total.claims ? '(top: ' + fmtMS(lmax) + ')' : '(no claims this hour)';

    var k = $('hour-kpis');
    clear(k);
    var last = n > 1 ? ms[n - 2] : ms[n - 1];
    [['claims', h.total.claims], ['submits', h.total.submits],
      ['next p50', fmtMS(h.total.next_p50_ms)], ['next p99', fmtMS(h.total.next_p99_ms)],
      ['last full minute', count(last.claims, 'claim') + ', ' + count(last.submits, 'submit')]].forEach(function (p) {
      var s = el('span', null, p[0] + ' ');
      s.appendChild(el('b', null, p[1]));
      k.appendChild(s);
    });
  }

  function renderClaims(page, st) {
    var rows = page.tasks.map(function (t) {
      var tr = el('tr', { 'data-task': t.id });
      var idc = el('td');
      idc.appendChild(link('#tasks/' + t.id, '#' + t.id, 'Task ' + t.id));
      tr.appendChild(idc);
      tr.appendChild(td(t.title || '(untitled)', 'title'));
      tr.appendChild(td(t.category, 'hide-phone'));
      tr.appendChild(holderCell(t.holder));
      var held = ticking(t.assigned_at, false);
      held.classList.add('hide-phone');
      tr.appendChild(held);
      tr.appendChild(ticking(t.lease_expires_at, true));
      var act = el('td', { 'class': 'act' });
      act.appendChild(forceRelease(t, function () { return loadPool(); }));
      tr.appendChild(act);
      return tr;
    });
    replaceRows($('claims-table').tBodies[0], rows);
    $('claims-empty').hidden = rows.length > 0;
    var holders = st && typeof st.holders === 'number' ? st.holders : rows.length;
    $('claims-count').textContent = holders > rows.length ? '(' + rows.length + ' of ' + holders + ')' : '(' + rows.length + ')';
  }

  function forceRelease(t, then) {
    return confirmButton('Force release', 'Confirm', 'force release task ' + t.id, 'release:' + t.id, function () {
      return call('POST', '/admin/tasks/' + t.id + '/release', {}).then(function (r) {
        if (!ok(r, 'Force release of task #' + t.id)) { return then(); }
        notice('Task #' + t.id + ' was taken back from ' + holderName(t.holder) + ' and is in the pool again.');
        return then();
      });
    });
  }

  // --- tasks ---
  function taskQuery() {
    var q = [];
    Object.keys(taskFilter).forEach(function (k) {
      if (taskFilter[k]) { q.push(k + '=' + encodeURIComponent(taskFilter[k])); }
    });
    var cur = taskPages[taskPages.length - 1];
    if (cur) { q.push('cursor=' + encodeURIComponent(cur)); }
    q.push('limit=50');
    return '?' + q.join('&');
  }

  function loadTasks() {
    return Promise.all([call('GET', '/tasks' + taskQuery()), loadNames(false)]).then(function (rs) {
      var r = rs[0];
      if (!ok(r, 'Tasks')) { return false; }
      taskNext = r.data.next_cursor;
      var rows = r.data.tasks.map(function (t) {
        var tr = el('tr', { 'data-task': t.id });
        if (t.id === taskOpen) { tr.className = 'selected'; }
        var idc = el('td');
        idc.appendChild(link('#tasks/' + t.id, '#' + t.id, 'Task ' + t.id));
        tr.appendChild(idc);
        var title = el('td', { 'class': 'title' });
        title.appendChild(link('#tasks/' + t.id, t.title || '(untitled)'));
        tr.appendChild(title);
        tr.appendChild(td(t.category, 'hide-phone'));
        var sc = el('td');
        sc.appendChild(el('span', { 'class': 'status ' + t.status }, t.status));
        tr.appendChild(sc);
        tr.appendChild(holderCell(t.holder, 'hide-phone'));
        tr.appendChild(td(fmtTime(t.created_at), 'hide-phone'));
        return tr;
      });
      replaceRows($('tasks-table').tBodies[0], rows);
      $('tasks-empty').hidden = rows.length > 0;
      $('tasks-newer').disabled = taskPages.length <= 1;
      $('tasks-older').disabled = !taskNext;
      $('tasks-page').textContent = 'page ' + taskPages.length;
      return true;
    });
  }

  function readFilters() {
    var iso = function (v) { return v ? new Date(v).toISOString() : ''; };
    taskFilter = {
      status: $('f-status').value,
      category: $('f-category').value.trim(),
      holder: $('f-editor').value,
      key: $('f-key').value.trim(),
      created_after: iso($('f-after').value),
      created_before: iso($('f-before').value)
    };
    taskPages = [''];
  }

  function showTaskDetail(show) {
    $('task-detail').hidden = !show;
    $('task-detail').parentNode.classList.toggle('with-detail', show);
  }

  function loadTask(id, focus) {
    return call('GET', '/tasks/' + id).then(function (r) {
      if (id !== taskOpen) { return false; }
      if (r.status === 404) {
        notice('Task #' + id + ' does not exist.', 'bad');
        showTaskDetail(false);
        return false;
      }
      if (!ok(r, 'Task #' + id)) { return false; }
      renderTask(r.data);
      showTaskDetail(true);
      if (focus) { $('td-title').focus(); }
      return true;
    });
  }

  function dl(target, pairs) {
    clear(target);
    pairs.forEach(function (p) {
      if (p[1] === null || p[1] === undefined || p[1] === '') { return; }
      target.appendChild(el('dt', null, p[0]));
      var dd = el('dd');
      if (p[1] instanceof Node) { dd.appendChild(p[1]); } else { dd.textContent = String(p[1]); }
      target.appendChild(dd);
    });
  }

  function json(v) { return JSON.stringify(v, null, 2); }

  function renderTask(d) {
    var t = d.task;
    $('td-title').textContent = '#' + t.id + ' ' + (t.title || '(untitled)');
    var status = el('span', { 'class': 'status ' + d.status }, d.status);
    var lease = null;
    if (d.status === 'assigned') {
      lease = el('span', { 'data-deadline': d.lease_expires_at, 'class': 'lease' });
      tickCell(lease);
    }
    var reserved = null;
    if (d.reserved_for) {
      reserved = el('span');
      reserved.appendChild(link('#editors/' + d.reserved_for, holderName('editor:' + d.reserved_for)));
      reserved.appendChild(document.createTextNode(' alone, until ' + fmtTime(d.reserved_until)));
    }
    var group = null;
    if (d.group_id) {
      group = el('span');
      group.appendChild(link('#tasks/' + d.group_id, 'task #' + d.group_id));
      group.appendChild(document.createTextNode(' (' + d.overlap + ' results asked)'));
    }
    dl($('td-meta'), [
      ['status', status], ['category', t.category],
      ['stages', d.stages ? stagesView(d.stages, d.stage, d.status) : null], ['offered to', reserved], ['group', group],
      ['priority', t.priority], ['key', d.key],
      ['holder', d.holder ? holderName(d.holder) + (holderName(d.holder) !== d.holder ? ' (' + d.holder + ')' : '') : null],
      ['fence', d.fence],
      // A task not held shows when it was last claimed (kept after a submit).
      [d.status === 'assigned' ? 'assigned' : 'last claimed', d.assigned_at ? fmtTime(d.assigned_at) : null], ['lease left', lease],
      ['attempts', d.attempts + ' of ' + d.max_attempts], ['snoozed', d.snoozes ? d.snoozes + (d.snoozes === 1 ? ' time' : ' times') : null],
      ['last error', d.last_error],
      ['created', fmtTime(d.created_at)], ['run after', fmtTime(d.run_after)], ['due', d.due_at ? fmtTime(d.due_at) : null],
      ['updated', fmtTime(d.updated_at)], ['done', d.done_at ? fmtTime(d.done_at) : null]
    ]);
    $('td-payload').textContent = json(t.payload);
    // A task with stages or of a group lists every result below; its last
    // one is not shown twice.
    $('td-result-box').hidden = !d.result || !!d.results;
    renderResults(d);
    renderGroup(d.group, t.id);
    if (d.result) {
      $('td-result-meta').textContent = 'submitted by ' + holderName(d.result.holder) + ' at ' + fmtTime(d.result.submitted_at) + ', fence ' + d.result.fence;
      $('td-result').textContent = json(d.result.result);
    }
    mergeHistory(d).then(function () { if (hist.task === t.id) { renderHistoryRows(); } });

    var acts = $('td-actions');
    if (acts.getAttribute('data-for') === t.id + ':' + d.status + ':' + d.fence) { return; } // keep a reason being typed
    acts.setAttribute('data-for', t.id + ':' + d.status + ':' + d.fence);
    clear(acts);
    var reload = function () { return Promise.all([loadTask(t.id, false), loadTasks()]); };
    if (d.status === 'assigned') {
      acts.appendChild(forceRelease({ id: t.id, holder: d.holder }, reload));
    }
    var change = function (op, label, verb) {
      var reason = el('input', { type: 'text', 'class': 'reason-in', maxlength: '1024', placeholder: 'reason (optional)', 'aria-label': 'Reason to ' + op + ' task ' + t.id });
      var run = function () {
        return call('POST', '/admin/tasks/' + t.id + '/' + op, { reason: reason.value }).then(function (r) {
          if (ok(r, label + ' task #' + t.id)) { notice('Task #' + t.id + ' ' + verb + '.'); }
          return reload();
        });
      };
      acts.appendChild(reason);
      if (op === 'cancel') {
        acts.appendChild(confirmButton(label, 'Confirm cancel', 'cancel task ' + t.id, 'cancel:' + t.id, run));
      } else {
        var b = el('button', { type: 'button', 'data-key': op + ':' + t.id }, label);
        b.addEventListener('click', function () { b.disabled = true; run().then(function () { b.disabled = false; }); });
        acts.appendChild(b);
      }
    };
    if (d.status === 'dead') { change('requeue', 'Requeue', 'is back in the pool'); }
    if (d.status === 'pending') { change('cancel', 'Cancel task', 'was cancelled'); }
    if (d.status === 'assigned') { change('cancel', 'Cancel task', 'was cancelled; ' + holderName(d.holder) + '\'s claim on it ended'); }
    acts.hidden = !acts.firstChild;
  }

  // stagesView shows a task's stages in order, the one it is at marked
  // (none once it is done).
  function stagesView(stages, at, status) {
    var ol = el('ol', { 'class': 'stages' });
    stages.forEach(function (s, i) {
      var li = el('li', null, s);
      if (s === at && status !== 'done' && status !== 'cancelled' && status !== 'dead') {
        li.setAttribute('aria-current', 'step');
        li.className = 'current';
        li.setAttribute('title', 'stage ' + (i + 1) + ' of ' + stages.length + ', current');
      }
      ol.appendChild(li);
    });
    return ol;
  }

  var DECISIONS = { approve: 'approved', send_back: 'sent back' };

  // renderResults lists the results of a task with stages or of a group,
  // oldest first: stage, editor, time, decision and notes, and the result.
  // The detail carries the latest; "Show older results" pages back, and the
  // older ones stay on screen while the latest page they join stays in the
  // detail.
  var olderRes = { task: 0, results: [], before: null, joins: '' };
  var shownDetail = null;
  function resultKey(r) { return r.task_id + '/' + r.fence; }

  function renderResults(d) {
    shownDetail = d;
    var rs = d.results;
    $('td-results-box').hidden = !rs;
    var list = $('td-results');
    clear(list);
    if (!rs) { return; }
    var keys = rs.map(resultKey);
    if (olderRes.task !== d.task.id || (olderRes.joins && keys.indexOf(olderRes.joins) < 0)) {
      olderRes = { task: d.task.id, results: [], before: null, joins: '' };
    }
    if (!olderRes.results.length) {
      olderRes.before = d.results_more ? d.results_before : null;
      olderRes.joins = keys.length ? keys[0] : '';
    }
    var all = olderRes.results.filter(function (r) { return keys.indexOf(resultKey(r)) < 0; }).concat(rs);
    all.forEach(function (r) {
      var li = el('li', { 'data-task': String(r.task_id), 'data-stage': r.stage || '' });
      if (r.decision === 'send_back') { li.className = 'sent-back'; }
      var head = el('div', { 'class': 'result-head' });
      if (r.stage) { head.appendChild(el('b', null, r.stage)); head.appendChild(document.createTextNode(' · ')); }
      if (r.task_id !== d.task.id) {
        head.appendChild(link('#tasks/' + r.task_id, 'task #' + r.task_id));
        head.appendChild(document.createTextNode(' · '));
      }
      var m = /^editor:(\d+)$/.exec(r.holder || '');
      if (m) { head.appendChild(link('#editors/' + m[1], holderName(r.holder))); } else { head.appendChild(document.createTextNode(holderName(r.holder))); }
      head.appendChild(document.createTextNode(' · ' + fmtTime(r.submitted_at) + ' · fence ' + r.fence));
      if (r.decision) {
        head.appendChild(el('span', { 'class': 'verdict ' + (r.decision === 'send_back' ? 'back' : r.decision === 'approve' ? 'ok' : '') }, DECISIONS[r.decision] || r.decision));
      }
      li.appendChild(head);
      if (r.notes) { li.appendChild(el('p', { 'class': 'notes' }, r.notes)); }
      var pre = el('pre', { 'class': 'json' }, json(r.result));
      li.appendChild(pre);
      list.appendChild(li);
    });
    $('td-results-count').textContent = '(' + all.length + (olderRes.before ? ' latest' : '') + ', oldest first)';
    $('td-results-older').hidden = !olderRes.before;
  }

  // loadOlderResults reads the page of results before the oldest shown.
  function loadOlderResults() {
    var id = olderRes.task, before = olderRes.before;
    if (!id || !before) { return Promise.resolve(); }
    $('td-results-older').disabled = true;
    return call('GET', '/tasks/' + id + '/results?limit=10&before=' + encodeURIComponent(before)).then(function (r) {
      $('td-results-older').disabled = false;
      if (olderRes.task !== id || olderRes.before !== before || !ok(r, 'Older results of task #' + id)) { return; }
      olderRes.results = r.data.results.concat(olderRes.results);
      olderRes.before = r.data.before;
      if (shownDetail && shownDetail.task.id === id) { renderResults(shownDetail); }
    });
  }

  // renderGroup shows the progress of a task's group: how many of its tasks
  // are done, each task with its status and holder, and whether the done
  // tasks' decisions agree.
  function renderGroup(g, self) {
    $('td-group-box').hidden = !g;
    if (!g) { return; }
    var agree = g.agree === null || g.agree === undefined ? 'pending' : g.agree ? 'yes' : 'no';
    var sum = $('td-group-sum');
    clear(sum);
    sum.appendChild(document.createTextNode('#' + g.id + ' · done '));
    sum.appendChild(el('b', { id: 'td-group-done' }, g.done + ' of ' + g.overlap));
    sum.appendChild(document.createTextNode(' · agree '));
    sum.appendChild(el('b', { id: 'td-group-agree', 'class': 'agree ' + agree }, agree));
    var rows = g.tasks.map(function (gt) {
      var tr = el('tr', { 'data-task': String(gt.id) });
      if (gt.id === self) { tr.className = 'selected'; }
      var idc = el('td');
      idc.appendChild(link('#tasks/' + gt.id, '#' + gt.id, 'Task ' + gt.id));
      tr.appendChild(idc);
      var sc = el('td');
      sc.appendChild(el('span', { 'class': 'status ' + gt.status }, gt.status));
      tr.appendChild(sc);
      tr.appendChild(gt.editor_id ? holderCell('editor:' + gt.editor_id) : td('–'));
      return tr;
    });
    replaceRows($('td-group').tBodies[0], rows);
  }

  // --- a task's audit trail ---
  // The detail answers the latest events and a cursor; "Show older events"
  // pages back. A refresh adds the new events to those on screen; should
  // more have come than the detail carries, the gap is read, or, when that
  // is too long, the list starts from the latest again.
  function mergeHistory(d) {
    var latest = d.history;
    var older = hist.task === d.task.id && hist.events.length && latest.length &&
      hist.events[0].id < latest[0].id;
    if (!older || !d.history_more) {
      hist = { task: d.task.id, events: latest.slice(), before: d.history_before };
      return Promise.resolve();
    }
    var known = hist.events[hist.events.length - 1].id;
    var join = function (gap) {
      var keep = hist.events.filter(function (ev) { return ev.id < latest[0].id; });
      gap = gap.filter(function (ev) { return ev.id > known && ev.id < latest[0].id; });
      hist.events = keep.concat(gap, latest);
    };
    if (latest[0].id <= known) { join([]); return Promise.resolve(); }
    return call('GET', '/tasks/' + d.task.id + '/events?limit=500&before=' + latest[0].id).then(function (r) {
      if (hist.task !== d.task.id) { return; }
      if (r.status === 200 && (!r.data.more || r.data.events[0].id <= known)) {
        join(r.data.events);
      } else {
        hist = { task: d.task.id, events: latest.slice(), before: d.history_before };
      }
    });
  }

  function renderHistoryRows() {
    var rows = hist.events.map(function (ev) {
      var tr = el('tr', { 'data-event': ev.id });
      tr.appendChild(td(fmtTime(ev.at)));
      tr.appendChild(td(ev.kind));
      tr.appendChild(num(ev.fence));
      tr.appendChild(td(ev.holder ? holderName(ev.holder) : '–'));
      tr.appendChild(td(ev.detail || '', 'title'));
      tr.appendChild(traceCell(ev.trace_id));
      return tr;
    });
    replaceRows($('td-history').tBodies[0], rows.reverse()); // newest first
    $('td-history-count').textContent = hist.events.length + (hist.before ? ' latest events shown' : (hist.events.length === 1 ? ' event' : ' events'));
    $('td-older').hidden = !hist.before;
  }

  // traceCell shows an event's trace id (the claim's, the submit's...): a link
  // to the tracing backend's view of the trace when telemetry.trace_url is
  // set, else text to copy; nothing for an event without one.
  function traceCell(id) {
    var cell = el('td', { 'class': 'trace' });
    if (id) { cell.appendChild(traceRef(id)); }
    return cell;
  }

  function traceRef(id) {
    if (/^https?:\/\//.test(traceURL)) {
      return el('a', {
        href: traceURL.split('{trace_id}').join(encodeURIComponent(id)), 'class': 'trace',
        rel: 'noopener noreferrer', target: '_blank', title: 'Open trace ' + id
      }, id);
    }
    return el('code', { 'class': 'trace', title: 'Trace ' + id }, id);
  }

  function loadOlder() {
    var id = hist.task, before = hist.before;
    if (!id || !before) { return Promise.resolve(); }
    $('td-older').disabled = true;
    return call('GET', '/tasks/' + id + '/events?limit=50&before=' + before).then(function (r) {
      $('td-older').disabled = false;
      if (hist.task !== id || !ok(r, 'Older events of task #' + id)) { return; }
      hist.events = r.data.events.concat(hist.events.filter(function (ev) { return ev.id >= before; }));
      hist.before = r.data.before;
      renderHistoryRows();
    });
  }

  // --- bulk actions ---
  // The filter's bulk actions: a dry run counts and lists the tasks, the
  // operator confirms (two presses), and the change names exactly those
  // tasks, so one that came to match in between is left alone.
  var bulkOps = {
    requeue: { status: 'dead', verb: 'requeue', done: 'requeued', label: 'Requeue' },
    cancel: { status: 'pending', verb: 'cancel', done: 'cancelled', label: 'Cancel' }
  };

  // bulkWhat names n tasks of a bulk action: "n dead tasks", "n pending
  // tasks", or, for a cancel that finds running ones, "n tasks (p pending,
  // r running)".
  function bulkWhat(o, n, data) {
    var s = n === 1 ? '' : 's';
    if (!data.running) { return n + ' ' + o.status + ' task' + s; }
    return n + ' task' + s + ' (' + data.pending + ' pending, ' + data.running + ' running)';
  }

  // bulkFilter is the applied filter as a bulk action's, or a reason why
  // it cannot be one.
  function bulkFilter() {
    var f = taskFilter;
    if (!f.category) { return { why: 'Filter by a category to act on all its tasks.' }; }
    if (f.holder || f.key || f.created_after) { return { why: 'Bulk actions take the category, status and created-before filters only.' }; }
    var body = { category: f.category };
    if (f.status) { body.status = f.status; }
    if (f.created_before) { body.created_before = f.created_before; }
    return { body: body };
  }

  function renderBulk() {
    var bf = bulkFilter();
    var st = taskFilter.status;
    $('bulk-requeue').disabled = !!bf.why || !!st && st !== 'dead';
    $('bulk-cancel').disabled = !!bf.why || !!st && st !== 'pending' && st !== 'assigned';
    $('bulk-why').textContent = bf.why || (st && st !== 'dead' && st !== 'pending' && st !== 'assigned' ?
      'Only dead tasks can be requeued, and only pending or running ones cancelled.' : '');
    hideBulk();
  }

  function hideBulk() {
    $('bulk-ask').hidden = true;
    var b = $('bulk-confirm').querySelector('button');
    if (b) { b.blur(); } // lets an armed question lapse, so refreshes go on
    clear($('bulk-confirm'));
  }

  function askBulk(op) {
    var o = bulkOps[op], bf = bulkFilter();
    if (bf.why) { return Promise.resolve(); }
    hideBulk();
    var body = Object.assign({ dry_run: true, limit: 10000 }, bf.body);
    return call('POST', '/admin/tasks/' + op, body).then(function (r) {
      if (!ok(r, o.label + ' by filter')) { return; }
      var n = r.data.matched, ids = r.data.ids;
      var what = bulkWhat(o, n, r.data) + ' in ' + bf.body.category +
        (bf.body.created_before ? ' created before ' + fmtTime(bf.body.created_before) : '');
      $('bulk-ask').hidden = false;
      if (n === 0) {
        $('bulk-count').textContent = 'No ' + (op === 'cancel' ? 'pending or running' : o.status) + ' task matches: nothing to ' + o.verb + '.';
        return;
      }
      $('bulk-count').textContent = what + (r.data.more ? ' (and more: the first ' + n + ' of them)' : '') + ' will be ' + o.done + '.' +
        (r.data.running ? ' The running ones are stopped: their holders are told, and what they send is refused.' : '');
      $('bulk-reason').value = '';
      $('bulk-confirm').appendChild(confirmButton(o.label + ' ' + n + ' task' + (n === 1 ? '' : 's'), 'Confirm: ' + o.verb + ' ' + n, o.verb + ' ' + what, 'bulk:' + op, function () {
        var change = Object.assign({ ids: ids, limit: ids.length, reason: $('bulk-reason').value }, bf.body);
        return call('POST', '/admin/tasks/' + op, change).then(function (c) {
          hideBulk();
          if (ok(c, o.label + ' by filter')) {
            notice(c.data.changed + ' of ' + bulkWhat(o, n, c.data) + ' ' + o.done +
              (c.data.changed < n ? ' (the others had moved on since the count).' : '.'));
          }
          return loadTasks();
        });
      }));
      $('bulk-confirm').querySelector('button').focus();
    });
  }

  // --- editors ---
  function loadEditors() {
    var cur = editorPages[editorPages.length - 1];
    return call('GET', '/editors?limit=100' + (cur ? '&cursor=' + encodeURIComponent(cur) : '')).then(function (r) {
      if (!ok(r, 'Editors')) { return false; }
      editorNext = r.data.next_cursor;
      var rows = r.data.editors.map(function (e) {
        names[e.id] = e.name;
        var tr = el('tr', { 'data-editor': e.id });
        if (e.id === editorOpen) { tr.className = 'selected'; }
        var name = el('th', { scope: 'row' });
        name.appendChild(link('#editors/' + e.id, e.name));
        if (e.disabled) { name.appendChild(document.createTextNode(' ')); name.appendChild(el('span', { 'class': 'tag disabled' }, 'disabled')); }
        tr.appendChild(name);
        tr.appendChild(td(categoriesText(e), 'hide-phone'));
        var holds = el('td');
        if (e.holding !== undefined) {
          holds.appendChild(el('span', { 'class': 'load' + (e.holding >= e.capacity ? ' full' : '') }, e.holding + ' of ' + e.capacity));
          if (e.claim) { holds.appendChild(document.createTextNode(' · ')); }
        }
        if (e.claim) {
          holds.appendChild(link('#tasks/' + e.claim.task_id, '#' + e.claim.task_id, 'Task ' + e.claim.task_id));
          if (e.claim.trace_id) { holds.appendChild(document.createTextNode(' ')); holds.appendChild(traceRef(e.claim.trace_id)); }
        } else if (e.holding === undefined) {
          holds.textContent = '–';
        }
        tr.appendChild(holds);
        tr.appendChild(num(e.today.submitted));
        tr.appendChild(num(e.today.skipped, 'hide-phone'));
        tr.appendChild(num(e.today.released, 'hide-phone'));
        tr.appendChild(num(e.today.expired, 'hide-phone'));
        return tr;
      });
      replaceRows($('editors-table').tBodies[0], rows);
      $('editors-newer').disabled = editorPages.length <= 1;
      $('editors-older').disabled = !editorNext;
      return true;
    });
  }

  function showEditorDetail(show) {
    $('editor-detail').hidden = !show;
    $('editor-detail').parentNode.classList.toggle('with-detail', show);
  }

  function loadEditor(id, focus) {
    return call('GET', '/editors/' + id).then(function (r) {
      if (id !== editorOpen) { return false; }
      if (r.status === 404) {
        notice('Editor #' + id + ' does not exist.', 'bad');
        showEditorDetail(false);
        return false;
      }
      if (!ok(r, 'Editor #' + id)) { return false; }
      renderEditor(r.data);
      showEditorDetail(true);
      // ops-time.js shows the editor's working time.
      document.dispatchEvent(new CustomEvent('taskd:editor-shown', { detail: { id: id } }));
      if (focus) { $('ed-title').focus(); }
      return true;
    });
  }

  // categoriesText lists an editor's categories, each with the stages it is
  // limited to.
  function categoriesText(e) {
    var lim = e.stages || {};
    return e.categories.map(function (c) { return lim[c] ? c + ' (' + lim[c].join(', ') + ')' : c; }).join(', ') || '–';
  }

  // stagesText writes stage limits as the form reads them.
  function stagesText(lim) {
    return Object.keys(lim || {}).sort().map(function (c) { return c + ': ' + lim[c].join(', '); }).join('; ');
  }

  // parseStages reads the form's stage limits: "cat: a, b; cat2: c". It
  // returns {stages} or {error}.
  function parseStages(text) {
    var out = {};
    var parts = text.split(';').map(function (p) { return p.trim(); }).filter(function (p) { return p; });
    for (var i = 0; i < parts.length; i++) {
      var at = parts[i].lastIndexOf(':');
      var cat = at < 0 ? '' : parts[i].slice(0, at).trim();
      var stages = at < 0 ? [] : parts[i].slice(at + 1).split(',').map(function (s) { return s.trim(); }).filter(function (s) { return s; });
      if (!cat || !stages.length) { return { error: 'Write each category\'s stages as "category: stage, stage" ("' + parts[i] + '" is not).' }; }
      out[cat] = stages;
    }
    return { stages: out };
  }

  function counts(c) {
    return c.submitted + ' submitted · ' + c.skipped + ' skipped · ' + c.released + ' released · ' + c.expired + ' expired · ' + c.claimed + ' claimed';
  }

  // recentClaims lists an editor's latest claims, newest first: the task, the
  // claim's time and its trace (linked as in the audit trail).
  function recentClaims(cs) {
    if (!cs.length) { return 'none'; }
    var ul = el('ul', { 'class': 'recent-claims' });
    cs.forEach(function (c) {
      var li = el('li', { 'data-task': String(c.task_id) });
      li.appendChild(link('#tasks/' + c.task_id, 'task #' + c.task_id));
      li.appendChild(document.createTextNode(' · fence ' + c.fence + ' · ' + fmtTime(c.claimed_at)));
      if (c.trace_id) { li.appendChild(document.createTextNode(' · ')); li.appendChild(traceRef(c.trace_id)); }
      ul.appendChild(li);
    });
    return ul;
  }

  function renderEditor(e) {
    $('ed-title').textContent = e.name;
    var claim = null;
    if (e.claim) {
      claim = el('span');
      claim.appendChild(link('#tasks/' + e.claim.task_id, 'task #' + e.claim.task_id));
      claim.appendChild(document.createTextNode(', lease left '));
      var left = el('span', { 'data-deadline': e.claim.lease_expires_at, 'class': 'lease' });
      tickCell(left);
      claim.appendChild(left);
      if (e.claim.trace_id) { claim.appendChild(document.createTextNode(', trace ')); claim.appendChild(traceRef(e.claim.trace_id)); }
    }
    if (e.claims && e.claims.length) {
      claim = el('ul', { 'class': 'recent-claims held-claims' });
      e.claims.forEach(function (c) {
        var li = el('li', { 'data-task': String(c.task_id) });
        li.appendChild(link('#tasks/' + c.task_id, 'task #' + c.task_id));
        li.appendChild(document.createTextNode(', lease left '));
        var left = el('span', { 'data-deadline': c.lease_expires_at, 'class': 'lease' });
        tickCell(left);
        li.appendChild(left);
        if (c.trace_id) { li.appendChild(document.createTextNode(', trace ')); li.appendChild(traceRef(c.trace_id)); }
        claim.appendChild(li);
      });
    }
    var load = e.capacity + (e.holding !== undefined ? ' (holds ' + e.holding + ' of ' + e.capacity + ')' : '');
    dl($('ed-meta'), [
      ['id', e.id], ['status', e.disabled ? 'disabled since ' + fmtTime(e.disabled_at) : 'enabled'],
      ['categories', e.categories.join(', ') || '–'], ['capacity', load],
      ['stage limits', e.stages ? stagesText(e.stages) : 'none: every stage'], ['holds', claim || '–'],
      ['today', counts(e.today)], ['all time', counts(e.all_time)],
      ['median claim → submit', e.median_claim_to_submit_ms === null ? '–' : fmtAge(e.median_claim_to_submit_ms) + ' (of the last ' + e.median_of + ')'],
      ['last active', e.last_active_at ? fmtTime(e.last_active_at) : 'never'],
      ['recent claims', recentClaims(e.recent_claims || [])], ['created', fmtTime(e.created_at)]
    ]);
    if (document.activeElement !== $('ed-cats')) { $('ed-cats').value = e.categories.join(', '); }
    var form = $('ed-work-form');
    if (form.getAttribute('data-for') !== String(e.id) || !form.contains(document.activeElement)) {
      if (form.getAttribute('data-for') !== String(e.id)) { $('ed-work-error').hidden = true; }
      form.setAttribute('data-for', String(e.id));
      $('ed-capacity').value = String(e.capacity);
      $('ed-stages').value = stagesText(e.stages);
    }
    var acts = $('ed-actions');
    clear(acts);
    var done = function (r, what) {
      if (ok(r, what)) { notice(what + ': done.'); }
      loadNames(true);
      return Promise.all([loadEditor(e.id, false), loadEditors()]);
    };
    if (e.disabled) {
      var b = el('button', { type: 'button', 'data-key': 'enable:' + e.id }, 'Enable');
      b.addEventListener('click', function () {
        call('POST', '/editors/' + e.id + '/enable', {}).then(function (r) { return done(r, 'Enable ' + e.name); });
      });
      acts.appendChild(b);
    } else {
      acts.appendChild(confirmButton('Disable', 'Confirm disable', 'disable ' + e.name, 'disable:' + e.id, function () {
        return call('POST', '/editors/' + e.id + '/disable', {}).then(function (r) { return done(r, 'Disable ' + e.name); });
      }));
    }
  }

  // --- agreement ---
  var agCat = '';        // the category the agreement view shows, '' for none yet
  var agAt = 0;          // when it was last read: the periodic refresh reads it once a minute
  var AGREEMENT_MS = 60000;

  // agColour is the background of a cell for a share 0..1: red to amber to
  // green, light enough for dark text.
  function agColour(p) {
    var hue = Math.round(120 * Math.max(0, Math.min(1, p)));
    return 'hsl(' + hue + ', 70%, 82%)';
  }

  function fmtAlpha(v) { return v === null || v === undefined ? 'undefined' : v.toFixed(3); }

  function loadAgreement() {
    var cat = agCat;
    $('ag-cat').value = $('ag-cat') === document.activeElement ? $('ag-cat').value : cat;
    if (!cat) {
      $('ag-kpis').hidden = true; $('ag-matrix').hidden = true; $('ag-legend').hidden = true;
      $('ag-empty').textContent = 'Name a category whose tasks ask for several results (overlap).';
      $('ag-empty').hidden = false;
      return Promise.resolve();
    }
    agAt = now();
    var since = new Date(now() + skew - Number($('ag-days').value) * 86400000).toISOString();
    return call('GET', '/admin/agreement?category=' + encodeURIComponent(cat) + '&since=' + encodeURIComponent(since)).then(function (r) {
      if (cat !== agCat) { return; }
      if (!ok(r, 'Agreement')) { return false; }
      renderAgreement(r.data);
    });
  }

  function renderAgreement(d) {
    var k = $('ag-kpis');
    k.textContent = '';
    var kpi = function (label, value) {
      var s = document.createElement('span');
      s.appendChild(document.createTextNode(label + ' '));
      var b = document.createElement('b');
      b.textContent = value;
      s.appendChild(b);
      k.appendChild(s);
    };
    kpi('α nominal', fmtAlpha(d.alpha.nominal));
    if ('interval' in d.alpha) { kpi('α interval', fmtAlpha(d.alpha.interval)); }
    kpi('groups', String(d.units));
    kpi('values', String(d.pairable_values));
    kpi('compared', d.field === null ? 'decision' : d.field);
    if (d.truncated) { kpi('', 'oldest ' + d.values + ' values only'); }
    k.hidden = false;
    var t = $('ag-matrix');
    var head = t.tHead, body = t.tBodies[0];
    head.textContent = ''; body.textContent = '';
    if (d.editors.length < 2 || d.pairs.length === 0) {
      t.hidden = true; $('ag-legend').hidden = true;
      $('ag-empty').textContent = 'No group of ' + d.category + ' in the window has results from two editors yet.';
      $('ag-empty').hidden = false;
      return;
    }
    $('ag-empty').hidden = true;
    var pairs = {};
    d.pairs.forEach(function (p) { pairs[p.editor_a + ':' + p.editor_b] = p; pairs[p.editor_b + ':' + p.editor_a] = p; });
    var hr = document.createElement('tr');
    var corner = document.createElement('th');
    corner.setAttribute('scope', 'col');
    corner.textContent = 'Editor';
    hr.appendChild(corner);
    d.editors.forEach(function (e) {
      var th = document.createElement('th');
      th.setAttribute('scope', 'col');
      th.textContent = e.name;
      hr.appendChild(th);
    });
    head.appendChild(hr);
    d.editors.forEach(function (row) {
      var tr = document.createElement('tr');
      var th = document.createElement('th');
      th.setAttribute('scope', 'row');
      var a = document.createElement('a');
      a.href = '#editors/' + row.id;
      a.textContent = row.name;
      th.appendChild(a);
      tr.appendChild(th);
      d.editors.forEach(function (col) {
        var td = document.createElement('td');
        if (row.id === col.id) {
          td.className = 'self';
          td.textContent = '—';
        } else if (pairs[row.id + ':' + col.id]) {
          var p = pairs[row.id + ':' + col.id];
          td.className = 'cell';
          td.style.background = agColour(p.percent);
          td.textContent = Math.round(p.percent * 100) + '%';
          var n = document.createElement('small');
          n.textContent = p.agreed + ' of ' + p.units;
          td.appendChild(n);
          td.title = row.name + ' and ' + col.name + ': ' + p.agreed + ' of ' + p.units + ' shared groups agree' +
            (p.kappa === null ? '' : ', Cohen\'s κ ' + p.kappa.toFixed(2));
        } else {
          td.className = 'none';
          td.textContent = '·';
          td.title = row.name + ' and ' + col.name + ' share no group';
        }
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    t.hidden = false;
    $('ag-legend').hidden = false;
  }

  // --- views ---
  var loaders = {
    pool: function () { return loadPool(); },
    tasks: function () {
      var ps = [];
      if (taskPages.length === 1) { ps.push(loadTasks()); }
      if (taskOpen) { ps.push(loadTask(taskOpen, false)); }
      return Promise.all(ps);
    },
    editors: function () {
      var ps = [loadEditors()];
      if (editorOpen) { ps.push(loadEditor(editorOpen, false)); }
      return Promise.all(ps);
    },
    agreement: function () {
      if (now() - agAt < AGREEMENT_MS) { return Promise.resolve(); }
      return loadAgreement();
    },
    // The instructions view (ops-instructions.js) loads when routed to,
    // not on every refresh: its edit box is not refilled under the operator.
    instructions: function () { return Promise.resolve(); },
    // The gold view (ops-gold.js) loads when routed to, and on its form.
    gold: function () { return Promise.resolve(); }
  };

  // routeOf reads a hash: its view and id (0 for none), or null for a hash
  // the console has no page at. The routes: "" and #pool, #tasks and
  // #tasks/ID, #editors and #editors/ID, #agreement and #agreement/CATEGORY, #instructions and
  // #instructions/CATEGORY, #gold and #gold/CATEGORY.
  function routeOf(hash) {
    var parts = hash.replace(/^#/, '').split('/');
    if (parts[0] === '' && parts.length === 1) { return { view: 'pool', id: 0 }; }
    if (parts[0] === 'agreement' || parts[0] === 'instructions' || parts[0] === 'gold') {
      var cat = '';
      try { cat = decodeURIComponent(parts.slice(1).join('/')); } catch (e) { return null; }
      return { view: parts[0], id: 0, category: cat };
    }
    if (!loaders[parts[0]] || parts.length > 2 || parts[0] === 'pool' && parts.length > 1) { return null; }
    if (parts.length === 1) { return { view: parts[0], id: 0 }; }
    return /^[1-9][0-9]{0,17}$/.test(parts[1]) ? { view: parts[0], id: Number(parts[1]) } : null;
  }

  function route() {
    var r = routeOf(window.location.hash);
    var next = r ? r.view : 'notfound';
    var id = r ? r.id : 0;
    var changed = next !== view;
    view = next;
    ['pool', 'tasks', 'editors', 'agreement', 'instructions', 'gold', 'notfound'].forEach(function (v) { $('view-' + v).hidden = v !== view; });
    document.querySelectorAll('.tabs a').forEach(function (a) {
      if (a.getAttribute('data-view') === view) { a.setAttribute('aria-current', 'page'); } else { a.removeAttribute('aria-current'); }
    });
    document.title = (r ? view.charAt(0).toUpperCase() + view.slice(1) : 'No such page') + ' · taskd ops';
    if (!r) {
      $('notfound-hash').textContent = window.location.hash;
      return Promise.resolve();
    }
    if (view === 'pool') { return refresh(); }
    if (view === 'agreement') {
      agCat = r.category;
      return loadAgreement().then(stamp);
    }
    if (view === 'instructions') {
      document.dispatchEvent(new CustomEvent('taskd:instructions-route', { detail: { category: r.category } }));
      return Promise.resolve().then(stamp);
    }
    if (view === 'gold') {
      document.dispatchEvent(new CustomEvent('taskd:gold-route', { detail: { category: r.category } }));
      return Promise.resolve().then(stamp);
    }
    if (view === 'tasks') {
      taskOpen = id;
      if (!id) { showTaskDetail(false); }
      var ps = [loadTasks()];
      if (id) { ps.push(loadTask(id, true)); }
      return Promise.all(ps).then(stamp);
    }
    editorOpen = id;
    if (!id) { showEditorDetail(false); }
    if (changed || !id) { loadNames(false); }
    var es = [loadEditors()];
    if (id) { es.push(loadEditor(id, true)); }
    return Promise.all(es).then(stamp);
  }

  function stamp() {
    var d = new Date();
    $('updated').textContent = 'updated ' + pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' · every ' + REFRESH_MS / 1000 + ' s while visible';
  }

  var refreshing = false;
  function refresh() {
    if (refreshing || !loaders[view]) { return Promise.resolve(); } // no such page: nothing to load
    refreshing = true;
    return loaders[view]().then(function (good) {
      refreshing = false;
      if (good !== false) {
        var st = $('status');
        if (st.classList.contains('warn')) { notice(''); }
        stamp();
      }
    }, function () { refreshing = false; });
  }

  // typing reports whether the operator is typing in a field: a refresh
  // then waits, so that nothing moves under their hands.
  function typing() {
    var a = document.activeElement;
    return a && (a.tagName === 'INPUT' || a.tagName === 'TEXTAREA' || a.tagName === 'SELECT');
  }

  setInterval(function () {
    if (document.hidden || armed > 0 || typing()) { return; }
    refresh();
  }, REFRESH_MS);
  setInterval(tick, 1000);
  document.addEventListener('visibilitychange', function () {
    if (document.hidden) {
      $('updated').textContent = 'paused while the tab is hidden';
    } else {
      refresh();
    }
  });
  window.addEventListener('hashchange', route);

  $('pause-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var cat = $('pause-cat').value.trim();
    if (!cat) { return; }
    var b = $('pause-form').querySelector('button');
    setPaused(cat, 'pause', b).then(function () { $('pause-cat').value = ''; });
  });
  $('task-filters').addEventListener('submit', function (e) {
    e.preventDefault();
    readFilters();
    renderBulk();
    loadTasks();
  });
  $('f-reset').addEventListener('click', function () {
    $('task-filters').reset();
    readFilters();
    renderBulk();
    loadTasks();
  });
  $('agreement-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var cat = $('ag-cat').value.trim();
    $('ag-cat').blur();
    if ('#agreement/' + encodeURIComponent(cat) === window.location.hash) { loadAgreement(); return; }
    window.location.hash = '#agreement/' + encodeURIComponent(cat);
  });
  $('ag-days').addEventListener('change', function () { $('ag-days').blur(); loadAgreement(); });
  // --- creating: an editor (its token shown once), a task ---
  $('new-editor-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var cats = $('ne-cats').value.split(',').map(function (c) { return c.trim(); }).filter(Boolean);
    var b = $('new-editor-form').querySelector('button');
    b.disabled = true;
    call('POST', '/editors', { name: $('ne-name').value.trim(), categories: cats }).then(function (r) {
      b.disabled = false;
      if (!ok(r, 'New editor')) { return; }
      notice('');
      $('ne-token-name').textContent = r.data.name;
      $('ne-token-value').textContent = r.data.token;
      $('ne-token').hidden = false;
      $('new-editor-form').reset();
      loadNames(false);
      return loadEditors();
    });
  });
  $('ne-token-done').addEventListener('click', function () {
    $('ne-token-value').textContent = ''; // gone from the page, as from the server
    $('ne-token').hidden = true;
  });
  $('new-task-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var payload;
    try {
      payload = JSON.parse($('nt-payload').value || '{}');
    } catch (err) {
      notice('Add a task: the payload is not JSON: ' + err.message, 'bad');
      $('nt-payload').focus();
      return;
    }
    var task = { category: $('nt-category').value.trim(), priority: Number($('nt-priority').value || 0), title: $('nt-title').value, payload: payload };
    var b = $('new-task-form').querySelector('button');
    b.disabled = true;
    call('POST', '/tasks', [task]).then(function (r) {
      b.disabled = false;
      if (!ok(r, 'Add a task')) { return; }
      var id = r.data.ids[0];
      notice('Task #' + id + ' added to ' + task.category + '.');
      $('nt-title').value = '';
      return loadTasks();
    });
  });

  $('bulk-requeue').addEventListener('click', function () { askBulk('requeue'); });
  $('bulk-cancel').addEventListener('click', function () { askBulk('cancel'); });
  $('bulk-dismiss').addEventListener('click', hideBulk);
  $('td-older').addEventListener('click', loadOlder);
  $('td-results-older').addEventListener('click', loadOlderResults);
  $('tasks-older').addEventListener('click', function () {
    if (!taskNext) { return; }
    taskPages.push(taskNext);
    loadTasks();
  });
  $('tasks-newer').addEventListener('click', function () {
    if (taskPages.length > 1) { taskPages.pop(); loadTasks(); }
  });
  $('editors-older').addEventListener('click', function () {
    if (!editorNext) { return; }
    editorPages.push(editorNext);
    loadEditors();
  });
  $('editors-newer').addEventListener('click', function () {
    if (editorPages.length > 1) { editorPages.pop(); loadEditors(); }
  });
  $('ed-cats-form').addEventListener('submit', function (e) {
    e.preventDefault();
    if (!editorOpen) { return; }
    var id = editorOpen;
    var cats = $('ed-cats').value.split(',').map(function (c) { return c.trim(); }).filter(function (c) { return c; });
    call('PATCH', '/editors/' + id, { categories: cats }).then(function (r) {
      if (ok(r, 'Categories')) { notice('Categories saved: ' + (cats.join(', ') || 'none') + '.'); $('ed-cats').blur(); }
      return Promise.all([loadEditor(id, false), loadEditors()]);
    });
  });
  $('ed-work-form').addEventListener('submit', function (e) {
    e.preventDefault();
    if (!editorOpen) { return; }
    var id = editorOpen;
    var fail = function (text) {
      $('ed-work-error').textContent = text;
      $('ed-work-error').hidden = false;
    };
    var p = parseStages($('ed-stages').value);
    if (p.error) { fail(p.error); $('ed-stages').focus(); return; }
    var c = $('ed-capacity').value.trim();
    if (!/^[0-9]+$/.test(c)) { fail('Capacity is a whole number of claims (1 or more).'); $('ed-capacity').focus(); return; }
    call('PATCH', '/editors/' + id, { capacity: Number(c), stages: p.stages }).then(function (r) {
      if (r.status === 200) {
        $('ed-work-error').hidden = true;
        notice('Saved: capacity ' + r.data.capacity + ', stage limits ' + (stagesText(r.data.stages) || 'none (every stage)') + '.');
        document.activeElement.blur();
      } else if (r.status === 400 || r.status === 422) {
        fail(message(r));
      } else {
        ok(r, 'Capacity and stage limits');
      }
      return Promise.all([loadEditor(id, false), loadEditors()]);
    });
  });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && !typing()) {
      if (view === 'tasks' && taskOpen) { window.location.hash = '#tasks'; }
      if (view === 'editors' && editorOpen) { window.location.hash = '#editors'; }
    }
  });

  // At phone width the filters start folded, so that the list shows first.
  if (window.matchMedia('(max-width: 40rem)').matches) { $('filters-box').open = false; }
  readFilters();
  renderBulk();
  route();
}());
