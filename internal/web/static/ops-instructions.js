// The console's Instructions view (#instructions/<category>): a category's
// current instructions in an edit box, saved as a new version when changed,
// their rendered preview and the versions before, each readable. The HTML
// previews are the server's, rendered from Markdown with raw HTML dropped and
// links of http, https and mailto only (internal/markdown); everything else
// is written with textContent. ops.js routes here with a
// taskd:instructions-route event.
(function () {
  'use strict';

  var csrf = document.querySelector('meta[name="csrf-token"]').getAttribute('content');
  var $ = function (id) { return document.getElementById(id); };
  var cat = '';

  function call(method, path, body) {
    var opts = { method: method, headers: { 'X-CSRF-Token': csrf }, credentials: 'same-origin' };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    return fetch('/ops/v1' + path, opts).then(function (res) {
      return res.json().then(function (data) { return { status: res.status, data: data }; },
        function () { return { status: res.status, data: null }; });
    }, function () { return { status: 0, data: null }; });
  }

  function message(r) {
    return r.data && r.data.error && r.data.error.message ? r.data.error.message : 'status ' + r.status;
  }

  function path() { return '/admin/categories/' + encodeURIComponent(cat) + '/instructions'; }

  function when(iso) {
    var d = new Date(iso);
    var pad = function (n) { return (n < 10 ? '0' : '') + n; };
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' + pad(d.getHours()) + ':' + pad(d.getMinutes());
  }

  function fail(text) {
    $('in-error').textContent = text;
    $('in-error').hidden = !text;
  }

  function load() {
    var forCat = cat;
    fail('');
    $('in-old').hidden = true;
    return Promise.all([call('GET', path()), call('GET', path() + '/versions')]).then(function (rs) {
      if (forCat !== cat) { return; }
      var c = rs[0], v = rs[1];
      $('in-editor').hidden = false;
      $('in-cat-name').textContent = cat;
      if (c.status === 200) {
        $('in-text').value = c.data.markdown;
        $('in-version').textContent = 'Version ' + c.data.version + ', saved ' + when(c.data.created_at) + ' from ' +
          (c.data.source === 'config' ? 'the config' : 'the API or this console') + '.';
        $('in-preview').innerHTML = c.data.html || '<p class="muted">(empty: nothing is shown to editors)</p>';
      } else if (c.status === 404) {
        $('in-text').value = '';
        $('in-version').textContent = 'No instructions yet: saving makes version 1.';
        $('in-preview').textContent = '';
      } else {
        fail('Could not read the instructions: ' + message(c) + '.');
      }
      var ol = $('in-versions');
      while (ol.firstChild) { ol.removeChild(ol.firstChild); }
      ((v.status === 200 && v.data.versions) || []).forEach(function (x) {
        var li = document.createElement('li');
        var b = document.createElement('button');
        b.type = 'button';
        b.className = 'link';
        b.textContent = 'Version ' + x.version;
        b.addEventListener('click', function () { showOld(x.version); });
        li.appendChild(b);
        li.appendChild(document.createTextNode(' · ' + when(x.created_at) + ' · ' + (x.source === 'config' ? 'config' : 'API')));
        ol.appendChild(li);
      });
    });
  }

  function showOld(version) {
    call('GET', path() + '?version=' + version).then(function (r) {
      if (r.status !== 200) { fail('Could not read version ' + version + ': ' + message(r) + '.'); return; }
      $('in-old-version').textContent = r.data.version;
      $('in-old-when').textContent = 'saved ' + when(r.data.created_at);
      $('in-old-body').innerHTML = r.data.html || '<p class="muted">(empty)</p>';
      $('in-old').hidden = false;
    });
  }

  document.addEventListener('taskd:instructions-route', function (e) {
    cat = e.detail.category;
    $('in-cat').value = cat;
    if (!cat) { $('in-editor').hidden = true; return; }
    load();
  });
  $('in-cat-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var c = $('in-cat').value.trim();
    $('in-cat').blur();
    var hash = '#instructions/' + encodeURIComponent(c);
    if (hash === window.location.hash) { load(); return; }
    window.location.hash = hash;
  });
  $('in-form').addEventListener('submit', function (e) {
    e.preventDefault();
    if (!cat) { return; }
    $('in-save').disabled = true;
    call('PUT', path(), { markdown: $('in-text').value }).then(function (r) {
      $('in-save').disabled = false;
      if (r.status !== 200) { fail('Not saved: ' + message(r) + '.'); return undefined; }
      var st = $('status');
      st.textContent = r.data.changed ? 'Saved as version ' + r.data.version + ' of ' + cat + "'s instructions: editors confirm it before their next task of " + cat + '.' :
        'No change: the text is version ' + r.data.version + "'s.";
      st.className = 'notice';
      st.hidden = false;
      $('in-text').blur();
      return load();
    });
  });
  $('in-old-close').addEventListener('click', function () { $('in-old').hidden = true; });
}());
