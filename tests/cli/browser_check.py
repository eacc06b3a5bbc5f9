#!/usr/bin/env python3
"""browser_check.py — loads a report page in headless Chromium and checks
what a reader would see, through the DevTools protocol over
--remote-debugging-pipe (standard library only).

  browser_check.py CHROMIUM PAGE.html USER_DATA_DIR [TEXT...]

Checks: the page loads; every <img> decodes with naturalWidth > 0; every
inline <svg> has a non-empty bounding box; no console error, uncaught
exception or error log entry (a blocked or failed load is one); no request
for anything but the page itself and data: URIs; no <script>; each TEXT
appears in the rendered text. Prints what it found, one fact a line; exits
0 when all hold, 1 otherwise, 77 when Chromium cannot start here.

Chromium is ended by its pid (Browser.close, then SIGKILL after 10 s); any
process still using USER_DATA_DIR afterwards is killed and is a failure."""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse

TIMEOUT_S = 40

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe"]

PROBE = """(async () => {
  const imgs = Array.from(document.images);
  const decoded = await Promise.all(imgs.map(i => i.decode().then(() => true, () => false)));
  return JSON.stringify({
    images: imgs.map((i, k) => ({alt: i.alt, width: i.naturalWidth, decoded: decoded[k]})),
    svgs: Array.from(document.querySelectorAll('svg')).map(s => {
      const b = s.getBBox(); return [b.width, b.height]; }),
    scripts: document.scripts.length,
    summary_rows: document.querySelectorAll('#summary tr').length,
    text: document.body.innerText,
  });
})()"""


class Pipe:
    """The DevTools protocol on fds: JSON messages ended by NUL."""

    def __init__(self, write_fd, read_fd):
        self.w, self.r = write_fd, read_fd
        self.buf, self.next_id, self.events = b"", 0, []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def receive(self, deadline):
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.r, 65536)
            if not chunk:
                raise EOFError("Chromium closed the pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method, params=None, session=None):
        want = self.send(method, params, session)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            msg = self.receive(deadline)
            if msg.get("id") == want:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method, since=0):
        """The first event `method` at index `since` or later of self.events."""
        deadline = time.monotonic() + TIMEOUT_S
        for msg in self.events[since:]:
            if msg.get("method") == method:
                return msg
        while True:
            msg = self.receive(deadline)
            self.events.append(msg)
            if msg.get("method") == method:
                return msg


def start(chromium, user_data_dir):
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def fds():  # Chromium reads commands on fd 3, answers on fd 4
        os.dup2(to_child_r, 3)
        os.dup2(from_child_w, 4)

    proc = subprocess.Popen([chromium] + FLAGS + [f"--user-data-dir={user_data_dir}", "about:blank"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, pass_fds=(3, 4), preexec_fn=fds)
    os.close(to_child_r)
    os.close(from_child_w)
    return proc, Pipe(to_child_w, from_child_r)


def errors_in(events):
    found = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
        elif m == "Runtime.exceptionThrown":
            found.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            found.append("log: " + p["entry"].get("text", ""))
    return found


def requests_in(events, page_url):
    urls = [e["params"]["request"]["url"] for e in events if e.get("method") == "Network.requestWillBeSent"]
    return [u for u in urls if u != page_url and not u.startswith("data:")]


def inspect(pipe, page_url):
    target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Runtime", "Log", "Network", "Page"):
        pipe.call(domain + ".enable", session=session)
    since = len(pipe.events)  # a late load event of about:blank must not count
    pipe.call("Page.navigate", {"url": page_url}, session=session)
    pipe.wait_event("Page.loadEventFired", since)
    result = pipe.call("Runtime.evaluate", {"expression": PROBE, "awaitPromise": True,
                                            "returnByValue": True}, session=session)
    if "exceptionDetails" in result:
        raise RuntimeError("probe failed: " + json.dumps(result["exceptionDetails"])[:300])
    return json.loads(result["result"]["value"])


def stop(proc, pipe, user_data_dir):
    """Ends Chromium by its pid; returns the pids of leftovers (killed)."""
    try:
        pipe.send("Browser.close")
        proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    left, flag = [], f"--user-data-dir={user_data_dir}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if flag in f.read().split(b"\0"):
                    left.append(int(pid))
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    return left


def check(facts, events, page_url, texts):
    failures = []
    images = facts["images"]
    print(f"images: {len(images)}, inline svgs: {len(facts['svgs'])}, summary rows: {facts['summary_rows']}")
    if not images:
        failures.append("no image in the page")
    for img in images:
        if img["width"] <= 0 or not img["decoded"]:
            failures.append(f"image '{img['alt']}' did not load (naturalWidth {img['width']})")
    for i, (w, h) in enumerate(facts["svgs"]):
        if w <= 0 or h <= 0:
            failures.append(f"inline svg {i} has an empty bounding box")
    if facts["scripts"]:
        failures.append(f"{facts['scripts']} script element(s) in the page")
    failures += errors_in(events)
    failures += ["request for " + u for u in requests_in(events, page_url)]
    failures += [f"text '{t}' not in the page" for t in texts if t not in facts["text"]]
    return failures


def main():
    chromium, page, user_data_dir = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
    page_url = "file://" + urllib.parse.quote(page)
    try:
        proc, pipe = start(chromium, user_data_dir)
    except OSError as e:
        print(f"SKIP: cannot start {chromium}: {e}")
        return 77
    try:
        facts = inspect(pipe, page_url)
    except (OSError, EOFError, TimeoutError, RuntimeError) as e:
        failures = [f"Chromium: {e}"]
        facts = None
    left = stop(proc, pipe, user_data_dir)
    if facts:
        failures = check(facts, pipe.events, page_url, sys.argv[4:])
    failures += [f"Chromium process {pid} outlived the browser" for pid in left]
    for f in failures:
        print("FAIL:", f)
    print("browser check:", "ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


sys.exit(main())
