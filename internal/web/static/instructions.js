// The workspace's instructions: the current task's category's instructions
// beside the task (folded at phone width), with their version, and each new
// version the editor has yet to confirm: the editor is given no task of that
// category until it does. The instructions' HTML is the server's, rendered
// from Markdown with raw HTML dropped and links of http, https and mailto
// only (internal/markdown): the one text from the server this page inserts
// as HTML. Everything else is written with textContent.
(function () {
  'use strict';

  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute('content');
  var $ = function (id) { return document.getElementById(id); };
  var REFRESH_MS = 20000;  // new versions show within this while the tab is visible
  var PHONE = window.matchMedia('(max-width: 40rem)');

  var list = [];      // GET /me/instructions: {category, version, confirmed_version, pending, html, created_at}
  var shown = '';     // "category/version" of the instructions shown beside the task
  var loading = null;

  function call(method, path, body) {
    var opts = { method: method, headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin' };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch('/app/v1' + path, opts).then(function (res) {
      return res.json().then(function (data) { return { status: res.status, data: data }; },
        function () { return { status: res.status, data: null }; });
    }, function () { return { status: 0, data: null }; });
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function clear(e) { while (e.firstChild) { e.removeChild(e.firstChild); } }

  var again = false;  // read once more when the reading in flight ends

  function load() {
    if (loading) { return loading; }
    loading = call('GET', '/me/instructions').then(function (r) {
      loading = null;
      if (r.status === 200 && r.data) { list = r.data.instructions || []; render(); }
      if (again) { again = false; return load(); }
      return undefined;
    });
    return loading;
  }

  // taskCategory is the category of the task shown, or '' when none is.
  function taskCategory() {
    if ($('task').hidden) { return ''; }
    return $('t-category').textContent;
  }

  function confirm(p, btn, err) {
    btn.disabled = true;
    call('POST', '/me/instructions/' + encodeURIComponent(p.category) + '/ack', { version: p.version }).then(function (r) {
      btn.disabled = false;
      if (r.status === 200) {
        return load().then(function () {
          document.dispatchEvent(new CustomEvent('taskd:instructions-confirmed', { detail: { category: p.category } }));
        });
      }
      err.textContent = r.status === 409 ? 'These instructions changed meanwhile: read the new version below.' :
        'Could not confirm: ' + (r.data && r.data.error ? r.data.error.message : 'status ' + r.status) + '.';
      err.hidden = false;
      return r.status === 409 ? load() : undefined;
    });
  }

  function render() {
    var pend = $('instr-pending');
    clear(pend);
    var pending = list.filter(function (p) { return p.pending; });
    pending.forEach(function (p) {
      var box = el('section', 'card instr-new');
      box.setAttribute('data-category', p.category);
      box.appendChild(el('h2', '', 'New instructions for ' + p.category + ': read and confirm'));
      box.appendChild(el('p', 'muted small', 'Version ' + p.version +
        (p.confirmed_version ? ' (you confirmed version ' + p.confirmed_version + ')' : '') +
        '. Until you confirm them, you get no tasks of ' + p.category + '.'));
      var body = el('div', 'md');
      body.innerHTML = p.html; // rendered by the server: see the top of this file
      box.appendChild(body);
      var err = el('p', 'notice bad', '');
      err.hidden = true;
      err.setAttribute('role', 'alert');
      var btn = el('button', 'primary', 'I have read them: confirm version ' + p.version);
      btn.type = 'button';
      btn.addEventListener('click', function () { confirm(p, btn, err); });
      box.appendChild(err);
      box.appendChild(btn);
      pend.appendChild(box);
    });
    pend.hidden = pending.length === 0;

    var cat = taskCategory();
    var cur = null;
    list.forEach(function (p) { if (p.category === cat && p.html !== '') { cur = p; } });
    var det = $('instr-current');
    if (cur) {
      var key = cur.category + '/' + cur.version;
      if (key !== shown) {
        $('instr-cat').textContent = cur.category;
        $('instr-version').textContent = cur.version;
        $('instr-body').innerHTML = cur.html; // rendered by the server: see the top of this file
        if (shown.split('/')[0] !== cur.category) { det.open = !PHONE.matches; }
        shown = key;
      }
      det.hidden = false;
    } else {
      det.hidden = true;
      shown = '';
    }
    var any = !pend.hidden || !det.hidden;
    $('instructions').hidden = !any;
    document.body.classList.toggle('has-instructions', any);
  }

  // The task shown changes (app.js): show its category's instructions,
  // reading them anew when that category's are not known yet.
  var last = '';
  var onTask = function () {
    var cat = taskCategory();
    if (cat === last) { return; }
    last = cat;
    render();
    if (cat) { load(); }
  };
  new MutationObserver(onTask).observe($('task'), { attributes: true, attributeFilter: ['hidden'] });
  new MutationObserver(onTask).observe($('t-category'), { childList: true, characterData: true, subtree: true });
  setInterval(function () { if (!document.hidden) { load(); } }, REFRESH_MS);
  // A claim answer named categories whose instructions wait for a
  // confirmation (app.js, from the Taskd-Instructions-Pending header): read
  // them now, after any reading begun before that answer.
  document.addEventListener('taskd:instructions-pending', function () {
    if (loading) { again = true; return; }
    load();
  });
  document.addEventListener('visibilitychange', function () { if (!document.hidden) { load(); } });
  load();
}());
