#!/usr/bin/env python3
"""trace_screenshot.py: a PNG screenshot of a Chrome trace (ampgrad train --profile, or ranks merged by
ampgrad trace merge) as catapult's Trace Viewer draws it, the viewer behind chrome://tracing, in headless
Chromium, offline. It is a docs tool (docs/profiling.md, "The screenshot"), not part of the tests.

The Perfetto UI is not used: it is served from ui.perfetto.dev and no Debian or PyPI package ships a built
copy. Catapult's viewer is: the `torch-tb-profiler` wheel (PyTorch's TensorBoard plugin) ships it
vulcanized as torch_tb_profiler/static/trace_viewer_full.html. That viewer is written against Web
Components v0 (HTML imports, document.registerElement, Shadow DOM v0), which Chromium has removed, so it
runs on the webcomponents.js 0.7.24 polyfill; the `xprof` wheel (XProf, TensorBoard's profile plugin) ships
that polyfill at the head of xprof/static/trace_viewer_index.js, and it is cut from there. Both wheels are
fetched once with `pip download` into a cache folder; Chromium comes from Debian (`apt-get install
chromium`) and is driven over the DevTools protocol with the `websocket-client` package (pip).

    ampgrad trace merge runs/z2 --out runs/z2/merged.json
    python3 scripts/trace_screenshot.py runs/z2/merged.json shot.png --zoom "step 3" --select all_gather@1

The page loads the trace with the viewer's own importer (tr.importer.Import), as chrome://tracing does;
--zoom sets the visible time range to the spans of that name on every process, --select selects the
first span of that name (on process PID with NAME@PID) so the panel below shows its args.
"""
import argparse
import base64
import gzip
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile

TB_PROFILER = "torch-tb-profiler==0.4.3"   # torch_tb_profiler/static/trace_viewer_full.html
XPROF = "xprof==2.24.2"                    # xprof/static/trace_viewer_index.js starts with webcomponents.js 0.7.24

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>ampgrad trace</title>
<script src="webcomponents.js"></script>
<link rel="import" href="trace_viewer_full.html">
<style>html, body { margin: 0; padding: 0; width: 100%; height: 100%; overflow: hidden; }
#trace-viewer { width: 100%; height: 100%; }</style>
<script>
'use strict';
window.__hideTraceViewerPolyfillWarning = true;
window.__state = 'loading';
// As the viewer's own embedding page does (catapult tracing/bin/index.html, torch-tb-profiler's
// trace_embedding.html): a tr-ui-timeline-view, and the trace given to tr.importer.Import.
document.addEventListener('WebComponentsReady', function () {
  const container = document.createElement('track-view-container');
  container.id = 'track_view_container';
  const viewer = document.createElement('tr-ui-timeline-view');
  viewer.track_view_container = container;
  Polymer.dom(viewer).appendChild(container);
  viewer.id = 'trace-viewer';
  viewer.globalMode = true;
  Polymer.dom(document.body).appendChild(viewer);
  window.__viewer = viewer;
  fetch('trace.json').then(r => r.text()).then(text => {
    const model = new tr.Model();
    return new tr.importer.Import(model).importTracesWithProgressDialog([text]).then(() => {
      viewer.model = model;
      viewer.viewTitle = TITLE;
      window.__model = model;
      window.__state = 'loaded';
    });
  }).catch(e => { window.__state = 'error: ' + e; });
});
</script></head><body></body></html>
"""

# Run in the page once the trace is loaded: the tracks it drew, then the zoom and the selection.
ARRANGE = """(async (zoom, select, hidePalette) => {
  const viewer = window.__viewer, model = window.__model, tv = viewer.trackView;
  const slices = (title, pid) => {
    const out = [];
    for (const p of model.getAllProcesses()) {
      if (pid !== null && p.pid !== pid) continue;
      for (const t of Object.values(p.threads))
        for (const s of t.sliceGroup.slices) if (s.title === title) out.push(s);
    }
    return out;
  };
  const tracks = model.getAllProcesses().map(p => ({
    process: p.userFriendlyName, threads: Object.values(p.threads).map(t =>
      ({name: t.name, slices: t.sliceGroup.slices.length,
        categories: [...new Set(t.sliceGroup.slices.map(s => s.category))].sort()}))}));
  // The track view sets its first viewport (the whole trace) once it is attached: wait for that.
  for (let i = 0; i < 200 && tv.pollIfViewportAttachedInterval_ !== undefined; i++)
    await new Promise(r => setTimeout(r, 50));
  const out = {tracks, warnings: model.importWarnings.map(w => w.type + ': ' + w.message)};
  if (zoom !== null) {
    const z = slices(zoom, null);
    if (!z.length) return {error: 'no span named ' + JSON.stringify(zoom)};
    const min = Math.min(...z.map(s => s.start)), max = Math.max(...z.map(s => s.end));
    const pad = (max - min) * 0.01;
    tv.modelTrackContainer_.updateCanvasSizeIfNeeded_();
    const dt = new tr.ui.TimelineDisplayTransform();
    dt.set(tv.viewport.currentDisplayTransform);
    dt.xSetWorldBounds(min - pad, max + pad, tv.modelTrackContainer_.canvas.width);
    tv.viewport.setDisplayTransformImmediately(dt);
    out.zoom_ms = [min, max];
  }
  if (select !== null) {
    const s = slices(select[0], select[1]);
    if (!s.length) return {error: 'no span named ' + JSON.stringify(select[0]) + ' on pid ' + select[1]};
    viewer.brushingStateController.changeSelectionFromTimeline(new tr.model.EventSet([s[0]]));
    out.selected = {title: s[0].title, start_ms: s[0].start, duration_ms: s[0].duration};
  }
  if (hidePalette && tv.mouseModeSelector_) tv.mouseModeSelector_.style.display = 'none';
  return out;
})"""


def log(msg):
    print(f"trace_screenshot: {msg}", flush=True)


def ensure_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    log("installing Debian's chromium (apt-get)")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(sudo + ["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(sudo + ["apt-get", "install", "-y", "-q", "chromium"], check=True, env=env)
    return shutil.which("chromium")


def ensure_websocket():
    try:
        import websocket  # noqa: F401
    except ImportError:
        log("installing websocket-client (pip)")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "websocket-client"], check=True)
    import websocket
    return websocket


def wheel_member(cache, requirement, member):
    """The bytes of one file of a wheel, downloading the wheel into cache once."""
    name = requirement.split("==")[0].replace("-", "_")
    version = requirement.split("==")[1]
    wheels = [f for f in os.listdir(cache) if f.startswith(f"{name}-{version}-") and f.endswith(".whl")]
    if not wheels:
        log(f"pip download {requirement}")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", cache, requirement],
                       check=True)
        wheels = [f for f in os.listdir(cache) if f.startswith(f"{name}-{version}-") and f.endswith(".whl")]
    with zipfile.ZipFile(os.path.join(cache, wheels[0])) as z:
        return z.read(member)


def viewer_files(cache):
    """(trace_viewer_full.html, webcomponents.js), cut from the wheels once and kept in cache."""
    os.makedirs(cache, exist_ok=True)
    viewer = os.path.join(cache, "trace_viewer_full.html")
    polyfill = os.path.join(cache, "webcomponents-0.7.24.js")
    if not os.path.exists(viewer):
        data = wheel_member(cache, TB_PROFILER, "torch_tb_profiler/static/trace_viewer_full.html")
        with open(viewer, "wb") as f:
            f.write(data)
    if not os.path.exists(polyfill):
        js = wheel_member(cache, XPROF, "xprof/static/trace_viewer_index.js").decode("utf-8")
        # The file is webcomponents.js 0.7.24 (Polymer Project, BSD), then catapult's own code, which
        # starts at its first "Copyright ... The Chromium Authors" comment.
        start = js.index("/**\n * @license\n * Copyright (c) 2014 The Polymer Project Authors.")
        end = js.index("// Copyright 2015 The Chromium Authors.", start)
        head = js[start:end]
        if "@version 0.7.24" not in head or "window.HTMLImports" not in head or "ShadowDOMPolyfill" not in head:
            sys.exit("trace_screenshot: xprof's trace_viewer_index.js no longer starts with webcomponents.js 0.7.24")
        with open(polyfill, "w") as f:
            f.write(head)
    return viewer, polyfill


def serve(root):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=root, **k)

        def log_message(self, *a):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class DevTools:
    """The smallest client of the Chrome DevTools protocol this needs: one page, calls in turn."""

    def __init__(self, websocket, url):
        self.ws = websocket.create_connection(url, suppress_origin=True, timeout=120)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page: {result['exceptionDetails']}")
        return result["result"].get("value")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="a Chrome trace JSON, or one gzipped (.gz): train --profile's trace.json, or trace merge's output")
    ap.add_argument("png", help="the screenshot to write")
    ap.add_argument("--zoom", metavar="NAME", help="show the time range of the spans named NAME (e.g. 'step 3')")
    ap.add_argument("--select", metavar="NAME[@PID]", help="select the first span named NAME (on process PID)")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=700)
    ap.add_argument("--title", help="the title shown top left (default: the trace's file name)")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/ampgrad/trace-viewer"),
                    help="where the wheels and the viewer's files are kept between runs")
    ap.add_argument("--keep-palette", action="store_true", help="leave the mouse-mode palette over the tracks")
    args = ap.parse_args()

    chromium = ensure_chromium()
    websocket = ensure_websocket()
    viewer, polyfill = viewer_files(args.cache)

    select = None
    if args.select:
        name, _, pid = args.select.rpartition("@") if "@" in args.select else (args.select, "", "")
        select = [name, int(pid) if pid else None]

    work = tempfile.mkdtemp(prefix="trace_screenshot.")
    browser = None
    server = None
    try:
        shutil.copy(viewer, os.path.join(work, "trace_viewer_full.html"))
        shutil.copy(polyfill, os.path.join(work, "webcomponents.js"))
        opener = gzip.open if args.trace.endswith(".gz") else open
        with opener(args.trace, "rb") as src, open(os.path.join(work, "trace.json"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        title = args.title or os.path.basename(args.trace)
        with open(os.path.join(work, "index.html"), "w") as f:
            f.write(PAGE.replace("TITLE", json.dumps(title)))
        server = serve(work)
        profile = os.path.join(work, "chromium-profile")
        command = [chromium, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                   "--force-device-scale-factor=1", f"--window-size={args.width},{args.height}",
                   "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"]
        if os.geteuid() == 0:
            command.insert(1, "--no-sandbox")   # Chromium's sandbox refuses to run as root
        browser = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(profile, "DevToolsActivePort")
        for _ in range(600):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if browser.poll() is not None:
                sys.exit(f"trace_screenshot: {chromium} exited with {browser.returncode}")
            time.sleep(0.1)
        port = open(port_file).read().split()[0]
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        devtools = DevTools(websocket, next(p for p in pages if p["type"] == "page")["webSocketDebuggerUrl"])
        devtools.call("Emulation.setDeviceMetricsOverride", width=args.width, height=args.height,
                      deviceScaleFactor=1, mobile=False)
        devtools.call("Page.navigate", url=f"http://127.0.0.1:{server.server_address[1]}/index.html")
        deadline = time.time() + 120
        state = "loading"
        while time.time() < deadline:
            state = devtools.evaluate("window.__state")
            if state not in (None, "loading"):
                break
            time.sleep(0.2)
        if state != "loaded":
            sys.exit(f"trace_screenshot: the viewer did not load the trace ({state})")
        arranged = devtools.evaluate(f"{ARRANGE}({json.dumps(args.zoom)}, {json.dumps(select)}, "
                                     f"{json.dumps(not args.keep_palette)})")
        if "error" in arranged:
            sys.exit(f"trace_screenshot: {arranged['error']}")
        for p in arranged["tracks"]:
            for t in p["threads"]:
                log(f"track {p['process']} / {t['name']}: {t['slices']} spans ({', '.join(t['categories'])})")
        for w in arranged["warnings"]:
            log(f"the viewer's importer warned: {w}")
        if "zoom_ms" in arranged:
            log(f"zoomed to {arranged['zoom_ms'][0]:.3f} .. {arranged['zoom_ms'][1]:.3f} ms")
        if "selected" in arranged:
            s = arranged["selected"]
            log(f"selected {s['title']} at {s['start_ms']:.3f} ms, {s['duration_ms']:.3f} ms")
        time.sleep(1.0)   # let the track view draw the new viewport and the panel the selection
        shot = devtools.call("Page.captureScreenshot", format="png")
        with open(args.png, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        log(f"wrote {args.png} ({os.path.getsize(args.png)} bytes)")
    finally:
        if browser is not None:
            browser.terminate()
            try:
                browser.wait(timeout=10)
            except subprocess.TimeoutExpired:
                browser.kill()
        if server is not None:
            server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
