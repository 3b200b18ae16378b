// The console's working time of an editor, on the editor's page: active hours
// (bars) and tasks (a line) per day as inline SVG, the window's figures, and a
// table per category (active time, tasks, tasks per active hour, the median
// active time per stage, the send-back rate, gold accuracy once gold tasks
// are scored). ops.js says which editor it shows with a taskd:editor-shown
// event. Everything from the server is written with textContent.
(function () {
  'use strict';

  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute('content');
  var $ = function (id) { return document.getElementById(id); };
  var SVG = 'http://www.w3.org/2000/svg';
  var W = 600, H = 120, TOP = 6;
  var shown = 0, loadedAt = 0, gen = 0;

  function call(path) {
    return fetch('/ops/v1' + path, { headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin' }).then(function (res) {
      return res.json().then(function (data) { return { status: res.status, data: data }; },
        function () { return { status: res.status, data: null }; });
    }, function () { return { status: 0, data: null }; });
  }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }

  function svg(tag, attrs, title) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (title) { var t = document.createElementNS(SVG, 'title'); t.textContent = title; e.appendChild(t); }
    return e;
  }

  function clear(e) { while (e.firstChild) { e.removeChild(e.firstChild); } }

  // hm writes milliseconds as hours and minutes: "2 h 05 min", "14 min",
  // or seconds under a minute.
  function hm(ms) {
    if (ms < 60000) { return Math.round(ms / 1000) + ' s'; }
    var m = Math.round(ms / 60000);
    if (m < 60) { return m + ' min'; }
    var r = m % 60;
    return Math.floor(m / 60) + ' h ' + (r < 10 ? '0' : '') + r + ' min';
  }

  // short writes a median: seconds under two minutes, else minutes.
  function short(ms) {
    return ms < 120000 ? Math.round(ms / 1000) + ' s' : Math.round(ms / 60000) + ' min';
  }

  function plural(n, one) { return n + ' ' + one + (n === 1 ? '' : 's'); }

  function rate(f) {
    if (f.send_back_rate === null) { return '–'; }
    return Math.round(f.send_back_rate * 100) + '% (' + f.sent_back + ' of ' + f.reviewed + ')';
  }

  function perHour(f) { return f.tasks_per_active_hour === null ? '–' : String(f.tasks_per_active_hour.toFixed(1)); }

  function niceMax(v) {
    if (v <= 0) { return 1; }
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var f = v / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  function render(d) {
    var t = d.total;
    $('ed-time-kpis').textContent = hm(t.active_ms) + ' active · ' + plural(t.submitted, 'task') + ' · ' +
      perHour(t) + ' per active hour · sent back ' + rate(t) + ' · ' + plural(t.released, 'release');

    // Active hours as bars, tasks as a line with its own scale.
    var chart = $('ed-time-chart');
    clear(chart);
    var days = d.daily, n = days.length, bw = W / n;
    var hmax = niceMax(Math.max.apply(null, days.map(function (x) { return x.active_ms / 3600000; }).concat([0.001])));
    var tmax = niceMax(Math.max.apply(null, days.map(function (x) { return x.submitted; }).concat([1])));
    var y = function (v, max) { return (H - (v / max) * (H - TOP)).toFixed(1); };
    chart.appendChild(svg('line', { 'class': 'grid', x1: 0, x2: W, y1: y(0.5, 1), y2: y(0.5, 1), 'vector-effect': 'non-scaling-stroke' }));
    var pts = [];
    days.forEach(function (x, i) {
      var h = x.active_ms / 3600000;
      if (h > 0) {
        chart.appendChild(svg('rect', { 'class': 'bar-active', x: (i * bw + 1).toFixed(1), width: Math.max(bw - 2, 0.5).toFixed(1),
          y: y(h, hmax), height: (H - y(h, hmax)).toFixed(1), 'data-day': x.day }));
      }
      pts.push((i * bw + bw / 2).toFixed(1) + ',' + y(x.submitted, tmax));
    });
    chart.appendChild(svg('polyline', { 'class': 'line-submits', points: pts.join(' '), 'vector-effect': 'non-scaling-stroke' }));
    days.forEach(function (x, i) {
      chart.appendChild(svg('rect', { 'class': 'hit', x: (i * bw).toFixed(1), width: bw.toFixed(1), y: 0, height: H },
        x.day + ': ' + hm(x.active_ms) + ' active, ' + plural(x.submitted, 'task')));
    });
    $('ed-time-max').textContent = '(top: ' + hmax + ' h, ' + plural(tmax, 'task') + ')';
    $('ed-time-first').textContent = n ? days[0].day : '';
    $('ed-time-last').textContent = n ? days[n - 1].day : '';

    var body = $('ed-time-table').tBodies[0];
    clear(body);
    if (!d.categories.length) {
      var tr = el('tr'), td = el('td', 'Nothing measured in this window.', 'muted');
      td.colSpan = 7;
      tr.appendChild(td);
      body.appendChild(tr);
      return;
    }
    d.categories.forEach(function (c) {
      var tr = el('tr');
      tr.setAttribute('data-category', c.category);
      tr.appendChild(el('td', c.category));
      tr.appendChild(el('td', hm(c.active_ms)));
      tr.appendChild(el('td', String(c.submitted)));
      tr.appendChild(el('td', perHour(c)));
      tr.appendChild(el('td', c.stages.map(function (s) { return (s.stage_name || 'all') + ' ' + short(s.median_active_ms); }).join(' · ') || '–', 'hide-phone'));
      tr.appendChild(el('td', rate(c)));
      tr.appendChild(el('td', c.gold_accuracy === null ? '–' : Math.round(c.gold_accuracy * 100) + '%', 'hide-phone'));
      body.appendChild(tr);
    });
  }

  function load(force) {
    if (!shown) { return; }
    if (!force && Date.now() - loadedAt < 30000) { return; }
    var g = ++gen, id = shown;
    loadedAt = Date.now();
    call('/editors/' + id + '/time?days=' + $('ed-time-days').value).then(function (r) {
      if (g !== gen || id !== shown) { return; }
      if (r.status !== 200 || !r.data) {
        $('ed-time-kpis').textContent = 'Working time unavailable: ' + (r.data && r.data.error ? r.data.error.message : 'status ' + r.status);
        return;
      }
      $('ed-time').setAttribute('data-loaded', String(id));
      render(r.data);
    });
  }

  document.addEventListener('taskd:editor-shown', function (ev) {
    var id = ev.detail && ev.detail.id;
    var changed = id !== shown;
    shown = id;
    if (changed) { $('ed-time').removeAttribute('data-loaded'); }
    load(changed);
  });
  $('ed-time-days').addEventListener('change', function () { load(true); });
}());
