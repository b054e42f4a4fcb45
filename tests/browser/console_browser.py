#!/usr/bin/env python3
"""The console in a real browser: Debian's headless Chromium against
`cplane serve` on a temporary store.

Loads every page, checks the DOM (the items, the ledger's timeline, the
charts, a payload holding a script shown as text and never run), takes
the Release action through the page's own form and script with a pasted
token, and checks with `cplane events --json` that the event landed and
names the token's actor. Saves a screenshot of each page.

Chromium is driven over its DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages separated by NUL bytes on fds 3
and 4), so that nothing beyond Python's standard library is needed.

Exit 0: passed; 1: failed; 77: skipped, only when Chromium is not
installed and CPLANE_TEST_CHROMIUM_REQUIRED is not set (CI sets it: no
Chromium is then a failure).

    console_browser.py --cplane build/cli/cplane --out build/screenshots
"""

import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOKEN = "browser-test-token-0123456789"


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)
    print(f"ok: {what}")


class Chromium:
    """One headless Chromium, one page, spoken to over the DevTools pipe."""

    def __init__(self, binary, profile):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # The child's fd 3 reads our commands, its fd 4 writes its answers.
        def child_fds():
            # Copies first: a pipe end may itself be fd 3 or 4, and dup2
            # onto the same number would leave it close-on-exec.
            reader, writer = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(reader, 3)
            os.dup2(writer, 4)
        args = [binary, "--headless=new", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--window-size=1280,1000",
                f"--user-data-dir={profile}", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # as root, Chromium's sandbox cannot start
        self.process = subprocess.Popen(args, preexec_fn=child_fds, stdout=subprocess.DEVNULL,
                                        stderr=open(profile + ".log", "w"),
                                        close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next_id = 0
        self._buffer = b""
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.page("Page.enable")
        self.page("Runtime.enable")
        # A fixed viewport, so the page has a size even before the window does.
        self.page("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False})

    def _send(self, message):
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")

    def _receive(self, timeout):
        deadline = time.time() + timeout
        while b"\0" not in self._buffer:
            if time.time() > deadline:
                raise Failure("Chromium did not answer in time")
            import select
            ready, _, _ = select.select([self._from_chrome], [], [], 0.5)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise Failure("Chromium closed its DevTools pipe")
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None, timeout=30):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._send(message)
        while True:
            answer = self._receive(timeout)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise Failure(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def page(self, method, params=None, timeout=30):
        return self.call(method, params, self.session, timeout)

    def evaluate(self, expression):
        result = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise Failure(f"the page's script failed: {expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def navigate(self, url):
        self.page("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && document.location.href === "
                      + json.dumps(url), f"{url} loads")

    def wait_for(self, expression, what, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.1)
        raise Failure(f"timed out waiting until {what}")

    def screenshot(self, path):
        # Under load a headless page can be asked for its picture before it is
        # laid out ("Cannot take screenshot with 0 width"): wait for a width,
        # and try once more after a pause if the capture still fails.
        self.wait_for("document.documentElement.getBoundingClientRect().width > 0 && "
                      "window.innerWidth > 0", "the page is laid out")
        params = {"format": "png", "captureBeyondViewport": True}
        try:
            data = self.page("Page.captureScreenshot", params)
        except Failure:
            time.sleep(1)
            data = self.page("Page.captureScreenshot", params)
        with open(path, "wb") as out:
            out.write(base64.b64decode(data["data"]))
        print(f"screenshot: {path}")

    def close(self):
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def cplane(binary, db, *args):
    result = subprocess.run([binary, "--db", db, *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise Failure(f"cplane {' '.join(args)}: exit {result.returncode}: {result.stderr}")
    return result.stdout


def make_store(binary, db):
    """A project with a fleet's worth of history: items in every state, a
    claim under a second fence, a session holding one, a payload that
    tries to run a script."""
    now = int(time.time() * 1e6)
    minute = 60_000_000
    at = lambda t, *args: cplane(binary, db, *args, "--now", str(t))
    at(now - 50 * minute, "project", "create", "alpha", "Alpha <i>project</i>")
    at(now - 50 * minute, "project", "create", "beta", "Beta")
    # The last 45 minutes of a small fleet (back-dated, oldest first, as the
    # log's times must rise with its seqs), for the overview's charts.
    history = []
    for i, ago in enumerate(range(45, 0, -3)):
        t0 = now - ago * minute
        k = 1 + (i * 7) % 4
        for _ in range(k):
            history.append(at(t0, "enqueue", "alpha", json.dumps({"task": f"earlier {i}"})).strip())
        claims = json.loads(at(t0 + (i % 5) * 9_000_000, "claim", "--owner", "worker-0", "--max",
                               str(k), "--json"))
        finish = [c["item_id"] for c in claims]
        at(t0 + 40_000_000, "finish", *finish, *sum([["--fence", "1"] for _ in finish], []),
           "--status", "failed" if i % 6 == 5 else "done")
    hostile = cplane(binary, db, "enqueue", "alpha",
                     '{"task":"<script>window.__pwned=1</script><img src=x onerror=\\"window.__pwned=2\\">"}').strip()
    # The hostile one is claimed, released, claimed again: fences 1 and 2.
    claimed = json.loads(cplane(binary, db, "claim", "--owner", "worker-1", "--json"))
    assert claimed["item_id"] == hostile
    cplane(binary, db, "release", hostile, "--fence", "1", "--reason", "worker restarting")
    again = json.loads(cplane(binary, db, "claim", "--owner", "worker-2", "--json"))
    assert again["item_id"] == hostile and again["fence"] == 2
    ids = [cplane(binary, db, "enqueue", "alpha", json.dumps({"task": f"step {i}"})).strip() for i in range(6)]
    beta = [cplane(binary, db, "enqueue", "beta", json.dumps({"job": i})).strip() for i in range(3)]
    for outcome in ("done", "done", "failed"):
        c = json.loads(cplane(binary, db, "claim", "--owner", "worker-3", "--json"))
        cplane(binary, db, "finish", c["item_id"], "--fence", str(c["fence"]), "--status", outcome)
    cplane(binary, db, "cancel", ids[5], "--reason", "not needed")
    cplane(binary, db, "session", "open", "agent-1")
    cplane(binary, db, "assign", "agent-1", ids[3], "--actions", "push,comment")
    cplane(binary, db, "gate", "agent-1", ids[3], "--fence", "1", "--action", "push", "--record")
    return {"hostile": hostile, "ids": ids, "beta": beta, "history": history}


def start_serve(binary, db, tokens, log):
    process = subprocess.Popen([binary, "--db", db, "serve", "--listen", "127.0.0.1:0",
                                "--token-file", tokens],
                               stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    line = process.stdout.readline().strip()
    if not line.startswith("listening on http://127.0.0.1:"):
        process.kill()
        raise Failure(f"cplane serve did not start: {line!r} (see {log})")
    return process, line[len("listening on "):]


def run(args):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if os.environ.get("CPLANE_TEST_CHROMIUM_REQUIRED"):
            print("FAIL: Chromium is not installed and CPLANE_TEST_CHROMIUM_REQUIRED is set "
                  "(apt-get install chromium)")
            return 1
        print("SKIP: Chromium is not installed (apt-get install chromium): the browser tests did "
              "not run")
        return 77
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="cplane-browser-")
    db = os.path.join(work, "console.db")
    tokens = os.path.join(work, "tokens")
    with open(tokens, "w") as f:
        f.write(f"# the browser test's operator\nalice {TOKEN}\n")
    store = make_store(args.cplane, db)
    serve, base = start_serve(args.cplane, db, tokens, os.path.join(work, "serve.log"))
    browser = None
    try:
        browser = Chromium(chromium, os.path.join(work, "profile"))
        shot = lambda name: browser.screenshot(os.path.join(args.out, name))

        browser.navigate(base + "/")
        check(browser.evaluate("document.querySelectorAll('#counts tr').length") == 4,
              "the overview counts all projects, alpha and beta")
        check(browser.evaluate("document.querySelectorAll('figure.chart svg').length") == 2,
              "the overview draws its two charts as inline SVG")
        check(browser.evaluate("document.querySelectorAll('svg rect.s-claimed').length") >= 15,
              "the throughput chart has a bar for each minute with claims")
        shot("overview.png")

        browser.navigate(base + "/items")
        listed = browser.evaluate("[...document.querySelectorAll('#items tr[data-item]')].map(r => r.dataset.item)")
        check(set(listed) == {store["hostile"], *store["ids"], *store["beta"], *store["history"]},
              "the items page lists every item")
        check(browser.evaluate("window.__pwned") is None, "the hostile payload did not run")
        check(browser.evaluate("document.scripts.length") == 1, "the page's only script is the console's")
        check("<script>window.__pwned=1</script>" in browser.evaluate("document.querySelector('#items').textContent"),
              "the hostile payload is shown as text")
        shot("items.png")

        browser.navigate(base + "/items?project=beta&order=oldest&limit=2")
        first_page = browser.evaluate("[...document.querySelectorAll('#items tr[data-item]')].map(r => r.dataset.item)")
        check(first_page == store["beta"][:2], "a filtered page holds the oldest two of beta")
        browser.evaluate("document.getElementById('next-page').click()")
        browser.wait_for("location.search.includes('after=')", "the next page loads")
        browser.wait_for("document.readyState === 'complete'", "the next page is complete")
        second = browser.evaluate("[...document.querySelectorAll('#items tr[data-item]')].map(r => r.dataset.item)")
        check(second == store["beta"][2:], "the next page holds the rest")

        item_url = base + "/items/" + store["hostile"]
        browser.navigate(item_url)
        events = json.loads(cplane(args.cplane, db, "events", store["hostile"], "--json"))
        steps = browser.evaluate("[...document.querySelectorAll('#timeline li')].map(li => li.dataset.type)")
        check(steps == [e["type"] for e in events], "the timeline shows every event of the ledger, in order")
        check(browser.evaluate("document.querySelectorAll('#timeline li .fence b').length") == 2,
              "the timeline marks both claims' new fences")
        check(browser.evaluate("window.__pwned") is None and
              "<script>" in browser.evaluate("document.getElementById('payload').textContent"),
              "the item page shows the payload as text")
        shot("item.png")

        # The action without a token: refused, shown, nothing written.
        before = len(events)
        browser.evaluate("document.querySelector('form.action[action$=\"/release\"]').requestSubmit()")
        browser.wait_for("document.getElementById('action-result').dataset.state === 'error'",
                         "the refusal is shown")
        check("401" in browser.evaluate("document.getElementById('action-result').textContent"),
              "without a token the release is refused with 401")
        check(len(json.loads(cplane(args.cplane, db, "events", store["hostile"], "--json"))) == before,
              "the refused release wrote nothing")

        # The token pasted, then the same form.
        browser.evaluate(f"document.getElementById('token').value = {json.dumps(TOKEN)}")
        browser.evaluate("document.getElementById('token-form').requestSubmit()")
        check(browser.evaluate("sessionStorage.getItem('cplane-token')") == TOKEN,
              "the token is kept in the tab's sessionStorage")
        check(browser.evaluate("document.cookie") == "", "no cookie holds it")
        browser.evaluate("document.querySelector('form.action[action$=\"/release\"] input[name=reason]').value = 'from the browser'")
        browser.evaluate("document.querySelector('form.action[action$=\"/release\"]').requestSubmit()")
        browser.wait_for("document.getElementById('action-result').dataset.state === 'ok'", "the release is done")
        shot("item-action.png")
        events = json.loads(cplane(args.cplane, db, "events", store["hostile"], "--json"))
        last = events[-1]
        check(last["type"] == "released" and last["actor"] == "alice" and last["fence"] == 2
              and last["reason"] == "from the browser",
              "the release landed as an event naming the token's actor, under the claim's fence")
        browser.wait_for("document.getElementById('item-status') && "
                         "document.getElementById('item-status').textContent === 'ready'",
                         "the page reloads with the item ready")
        shot("item-released.png")

        browser.navigate(base + "/sessions")
        check(browser.evaluate("document.querySelector('#sessions').textContent.includes('agent-1')"),
              "the sessions page lists agent-1")
        check(browser.evaluate(f"!!document.querySelector('#leases tr[data-item=\"{store['ids'][3]}\"]')"),
              "the leases table lists the session's item")
        shot("sessions.png")

        browser.navigate(base + "/projects")
        browser.evaluate("document.querySelector('tr[data-project=\"beta\"] form.action').requestSubmit()")
        browser.wait_for("document.getElementById('action-result').dataset.state === 'ok'", "the pause is done")
        check(json.loads(cplane(args.cplane, db, "project", "show", "beta", "--json"))["paused"],
              "beta is paused by the projects page's form")
        browser.wait_for("document.querySelector('tr[data-project=\"beta\"]') && "
                         "document.querySelector('tr[data-project=\"beta\"]').textContent.includes('paused')",
                         "the page reloads with beta paused")
        shot("projects.png")

        browser.navigate(base + "/verify")
        check(browser.evaluate("document.getElementById('verdict').textContent").startswith("ok:"),
              "verify finds the rows agree with the log")
        shot("verify.png")
    finally:
        if browser:
            browser.close()
        serve.send_signal(signal.SIGTERM)
        code = serve.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)
    check(code == 0, "cplane serve exits 0 on SIGTERM")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cplane", required=True, help="the cplane binary")
    parser.add_argument("--out", required=True, help="where the screenshots go")
    args = parser.parse_args()
    try:
        return run(args)
    except Failure as failure:
        print(f"FAIL: {failure}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
