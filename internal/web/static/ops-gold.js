// The console's Gold view (#gold, #gold/<category>): each editor's gold
// accuracy per category over a window, and each pause in force with its reason
// and a Lift button. Everything is written with textContent. ops.js routes
// here with a taskd:gold-route event.
(function () {
  'use strict';

  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute('content');
  var $ = function (id) { return document.getElementById(id); };
  var cat = '';

  function call(method, path) {
    var opts = { method: method, headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin' };
    return fetch('/ops/v1' + path, opts).then(function (res) {
      return res.json().then(function (data) { return { status: res.status, data: data }; },
        function () { return { status: res.status, data: null }; });
    }, function () { return { status: 0, data: null }; });
  }

  function message(r) {
    return r.data && r.data.error && r.data.error.message ? r.data.error.message : 'status ' + r.status;
  }

  function fail(text) {
    $('gold-error').textContent = text;
    $('gold-error').hidden = !text;
  }

  function cell(tr, text, cls) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
  }

  function row(e) {
    var tr = document.createElement('tr');
    cell(tr, e.editor_name || ('editor ' + e.editor_id));
    cell(tr, e.category);
    cell(tr, String(e.answers), 'num');
    cell(tr, String(e.correct), 'num');
    cell(tr, e.answers ? Math.floor(e.accuracy * 100) + '%' : '–', 'num');
    var td = cell(tr, '');
    if (e.paused) {
      var span = document.createElement('span');
      span.className = 'badge bad gold-reason';
      span.textContent = 'Paused: ' + e.paused.reason;
      td.appendChild(span);
      td.appendChild(document.createTextNode(' '));
      var b = document.createElement('button');
      b.type = 'button';
      b.className = 'gold-lift';
      b.textContent = 'Lift';
      b.setAttribute('aria-label', 'Lift the pause of ' + (e.editor_name || e.editor_id) + ' from ' + e.category);
      b.addEventListener('click', function () { lift(e, b); });
      td.appendChild(b);
    }
    return tr;
  }

  function load() {
    fail('');
    var q = '?window=' + encodeURIComponent($('gold-window').value);
    if (cat) { q += '&category=' + encodeURIComponent(cat); }
    return call('GET', '/admin/gold' + q).then(function (r) {
      if (r.status !== 200) { fail('Could not read the gold accuracy: ' + message(r) + '.'); return; }
      var rows = r.data.editors.slice();
      // A pause whose answers fell out of the window is still shown.
      r.data.pauses.forEach(function (p) {
        if (!rows.some(function (e) { return e.editor_id === p.editor_id && e.category === p.category; })) {
          rows.push({ editor_id: p.editor_id, editor_name: p.editor_name, category: p.category, answers: 0, correct: 0, accuracy: 0, paused: p });
        }
      });
      var tb = $('gold-rows');
      while (tb.firstChild) { tb.removeChild(tb.firstChild); }
      rows.forEach(function (e) { tb.appendChild(row(e)); });
      $('gold-empty').hidden = rows.length > 0;
      $('gold-table').hidden = rows.length === 0;
    });
  }

  function lift(e, b) {
    b.disabled = true;
    call('DELETE', '/admin/gold/pauses/' + e.editor_id + '/' + encodeURIComponent(e.category)).then(function (r) {
      if (r.status !== 204 && r.status !== 404) { b.disabled = false; fail('Not lifted: ' + message(r) + '.'); return undefined; }
      var st = $('status');
      st.textContent = 'Lifted the pause of ' + (e.editor_name || e.editor_id) + ' from ' + e.category + ': its next claims take ' + e.category + ' again.';
      st.className = 'notice';
      st.hidden = false;
      return load();
    });
  }

  document.addEventListener('taskd:gold-route', function (e) {
    cat = e.detail.category;
    $('gold-cat').value = cat;
    load();
  });
  $('gold-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var c = $('gold-cat').value.trim();
    var hash = c ? '#gold/' + encodeURIComponent(c) : '#gold';
    if (hash === window.location.hash || (!c && window.location.hash === '#gold')) { load(); return; }
    window.location.hash = hash;
  });
}());
