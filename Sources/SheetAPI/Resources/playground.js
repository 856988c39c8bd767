// sheetd playground: drag a sheet and watch sheetd decide. Plain JavaScript, no build step,
// nothing fetched from anywhere but this sheetd. The page keeps no sheet logic of its own:
// every position it shows is the one sheetd answered, and every event in the log is one
// sheetd streamed. It only measures the gesture (translation and velocity, in points) and
// resolves detents to draw them when the server does not send `heights` itself.
"use strict";

(() => {
  /** Where the API key lives: this tab's sessionStorage, never localStorage, a cookie or a URL. */
  const KEY_STORAGE = "sheetd.playground.apiKey";
  /** The setup a bare /playground starts with: two detents and a threshold, the interceptor. */
  const DEMO_SETUP = "detents=large,medium&threshold=height:300";
  /** A portrait phone's width for its height (390 × 844 points). Rotation swaps the two. */
  const PORTRAIT_ASPECT = 390 / 844;
  /** The velocity of a release is measured over the pointer's last 100 ms. */
  const VELOCITY_WINDOW_MS = 100;
  /**
   * EventSource delivers a message whose `event:` line names a type only to listeners of that
   * type, so each type sheetd streams is listened for by name. A type missing here still shows:
   * the next event's seq reveals the gap and the page reads the missing ones from the API.
   */
  const EVENT_TYPES = [
    "presented", "detentChanged", "intercepted", "confirmationCancelled", "dismissBlocked", "dismissed",
    "changesMarked", "resized", "pushed", "popped", "covered", "uncovered",
  ];

  const state = {
    session: null, // sheetd's latest answer for the session on screen
    parent: null, // the session this one is presented over (Part 2), when there is one
    setupQuery: "", // the setup as the address carries it, without the session
    width: null, // the phone's width in points; rotation swaps it with the container height
    scale: 1, // CSS pixels per point
    placed: false, // whether the sheet has a position yet (the first one is not animated)
    lastSeq: 0, // the newest event in the log
    stream: null, // { close() } of the live event stream
    generation: 0, // counts attachments, so a late message of an old stream is dropped
    logQueue: Promise.resolve(),
    drag: null, // the pointer gesture in progress
    sending: false,
    lastGesture: null,
    refreshing: false,
    refreshAgain: false,
    settleTimer: 0,
    pending: 0, // API calls in flight
  };

  const $ = (testid) => document.querySelector(`[data-testid="${testid}"]`);
  const sheet = () => $("sheet");

  // ---- The API --------------------------------------------------------------------------

  function storedKey() {
    return sessionStorage.getItem(KEY_STORAGE) || "";
  }

  /** One API call. Never throws: `{ok, status, body}` or `{ok: false, status, error}`. */
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const key = storedKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    // How many calls are in flight, for a test to know the page has caught up.
    document.body.dataset.pending = String(++state.pending);
    try {
      return await call(method, path, headers, body);
    } finally {
      document.body.dataset.pending = String(--state.pending);
    }
  }

  async function call(method, path, headers, body) {
    let response;
    try {
      response = await fetch(path, {
        method, headers, cache: "no-store",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (failure) {
      return { ok: false, status: 0, error: { code: "unreachable", message: `sheetd could not be reached (${failure.message}).` } };
    }
    const text = await response.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    if (response.status === 401) askForKey(json && json.error ? json.error.message : "");
    if (response.ok) return { ok: true, status: response.status, body: json };
    const error = json && json.error ? json.error : { code: `http_${response.status}`, message: text.slice(0, 300) || response.statusText };
    return { ok: false, status: response.status, error };
  }

  const sessionPath = (id) => `/sessions/${encodeURIComponent(id)}`;

  // ---- Geometry ---------------------------------------------------------------------------

  function containerHeightOf(session) {
    return typeof session.containerHeight === "number" ? session.containerHeight : session.config.containerHeight;
  }

  /** A detent's height in points, as sheetd's detent table resolves it. */
  function resolve(detent, containerHeight) {
    if (detent === "large") return containerHeight;
    if (detent === "medium") return containerHeight * 0.5;
    if (detent.startsWith("fraction:")) return containerHeight * Number(detent.slice(9));
    if (detent.startsWith("height:")) return Math.min(Number(detent.slice(7)), containerHeight);
    return containerHeight;
  }

  /** Each detent and its height, in detent order: sheetd's `heights` when it sends them. */
  function heightsOf(session) {
    if (session.heights && typeof session.heights === "object") return Object.entries(session.heights);
    const containerHeight = containerHeightOf(session);
    return session.config.detents.map((detent) => [detent, resolve(detent, containerHeight)]);
  }

  function heightOf(session, detent) {
    const found = heightsOf(session).find(([name]) => name === detent);
    return found ? found[1] : resolve(detent, containerHeightOf(session));
  }

  /** `dimmed` when sheetd says; without it, UIKit's default: dimmed at every detent while shown. */
  function dimmedOf(session) {
    if (typeof session.dimmed === "boolean") return session.dimmed;
    return session.phase !== "dismissed";
  }

  function stackOf(session) {
    if (Array.isArray(session.stack) && session.stack.length) return session.stack;
    return [session.config.rootScreen || "root"];
  }

  const points = (value) => (Number.isInteger(value) ? String(value) : value.toFixed(1));
  const round2 = (value) => Math.round(value * 100) / 100;

  // ---- Drawing ----------------------------------------------------------------------------

  /** The sheet's offset from the container's top, in CSS pixels, at rest. */
  function restingOffset(session) {
    const containerHeight = containerHeightOf(session);
    if (session.phase === "dismissed") return containerHeight * state.scale + 24;
    return (containerHeight - heightOf(session, session.detent)) * state.scale;
  }

  function placeSheet(element, offset, animate) {
    const transform = `translateY(${offset.toFixed(2)}px)`;
    if (element.style.transform === transform) return;
    element.classList.toggle("settling", animate);
    element.style.transform = transform;
    if (element !== sheet()) return;
    if (!animate) {
      element.dataset.animating = "false";
      return;
    }
    element.dataset.animating = "true";
    clearTimeout(state.settleTimer);
    // transitionend ends it; the timer only covers a transition the browser skipped.
    state.settleTimer = setTimeout(() => { element.dataset.animating = "false"; }, 700);
  }

  function computeScale(session) {
    const containerHeight = containerHeightOf(session);
    const phone = $("phone");
    const top = phone.getBoundingClientRect().top + window.scrollY;
    const availableHeight = Math.max(200, window.innerHeight - top - 28);
    const availableWidth = Math.max(200, window.innerWidth * 0.42);
    return Math.min(1, availableHeight / containerHeight, availableWidth / state.width);
  }

  function render() {
    const session = state.session;
    if (!session) return;
    const containerHeight = containerHeightOf(session);
    if (state.width === null) state.width = Math.round(containerHeight * PORTRAIT_ASPECT);
    if (!state.drag) state.scale = computeScale(session);
    const scale = state.scale;
    const phone = $("phone");
    phone.style.width = `${state.width * scale}px`;
    phone.style.height = `${containerHeight * scale}px`;
    phone.dataset.scale = String(scale);
    phone.dataset.containerHeight = String(containerHeight);

    const element = sheet();
    element.style.height = `${containerHeight * scale}px`;
    element.dataset.session = session.id;
    element.dataset.phase = session.phase;
    element.dataset.detent = session.detent;
    element.dataset.version = String(session.version);
    element.dataset.hasChanges = String(session.hasChanges === true);
    if (!state.drag && !state.sending) {
      placeSheet(element, restingOffset(session), state.placed);
      state.placed = true;
    }

    const dimming = $("dimming");
    const dimmed = dimmedOf(session);
    dimming.classList.toggle("dimmed", dimmed);
    dimming.dataset.dimmed = String(dimmed);
    dimming.dataset.source = typeof session.dimmed === "boolean" ? "sheetd" : "default";

    renderMarkers(session, containerHeight, scale);
    renderSheetContent(session);
    renderParent(scale);
    renderInfo(session, containerHeight);
    $("confirmation").hidden = session.phase !== "confirming";
  }

  function renderMarkers(session, containerHeight, scale) {
    const list = $("detent-markers");
    list.replaceChildren();
    const threshold = session.config.thresholdDetent;
    for (const [detent, height] of heightsOf(session)) {
      const marker = document.createElement("li");
      marker.className = "marker";
      marker.dataset.testid = `marker-${detent}`;
      marker.dataset.detent = detent;
      marker.dataset.height = String(height);
      const top = (containerHeight - height) * scale;
      marker.style.top = `${top}px`;
      marker.classList.toggle("near-top", top < 18);
      let label = `${detent} · ${points(height)} pt`;
      if (detent === threshold) {
        marker.classList.add("threshold");
        label += " · threshold";
        if (session.thresholdActive === false) {
          marker.classList.add("inactive");
          label += " (inactive)";
        }
      }
      if (detent === session.detent && session.phase !== "dismissed") marker.classList.add("current");
      const text = document.createElement("span");
      text.textContent = label;
      marker.append(text);
      list.append(marker);
    }
  }

  function renderSheetContent(session) {
    const stack = stackOf(session);
    $("sheet-title").textContent = stack[stack.length - 1];
    $("nav-back").hidden = stack.length < 2;
    $("changes-badge").hidden = session.hasChanges !== true;
    $("sheet-detent").textContent = `${session.detent} · ${points(heightOf(session, session.detent))} pt`;
    const choice = $("select-detent-choice");
    const kept = choice.value;
    choice.replaceChildren();
    for (const [detent] of heightsOf(session)) {
      if (detent === session.config.thresholdDetent) continue;
      const option = document.createElement("option");
      option.value = option.textContent = detent;
      choice.append(option);
    }
    if ([...choice.options].some((option) => option.value === kept)) choice.value = kept;
    $("mark-changes").textContent = session.hasChanges === true ? "Mark no changes" : "Mark changes";
    $("resize-height").placeholder = String(containerHeightOf(session));
  }

  function renderParent(scale) {
    const under = $("parent-sheet");
    const parent = state.parent;
    if (!parent || parent.phase === "dismissed") {
      under.hidden = true;
      return;
    }
    under.hidden = false;
    under.style.height = `${containerHeightOf(parent) * scale}px`;
    under.querySelector(".sheet-title").textContent = `${stackOf(parent).slice(-1)[0]} (below)`;
    placeSheet(under, (containerHeightOf(parent) - heightOf(parent, parent.detent)) * scale, false);
  }

  function renderInfo(session, containerHeight) {
    $("info-session").textContent = session.id;
    let phase = session.phase;
    if (session.child) phase += ` · covered by ${session.child}`;
    $("info-phase").textContent = phase;
    $("info-detent").textContent = session.detent;
    $("info-version").textContent = String(session.version);
    $("info-container").textContent = `${points(containerHeight)} pt${state.width ? ` × ${points(state.width)} wide` : ""}`;
    const setup = state.setupQuery ? `${state.setupQuery}&` : "";
    $("session-link").href = `/playground?${setup}session=${encodeURIComponent(session.id)}`;
    $("setup-link").href = `/playground${state.setupQuery ? `?${state.setupQuery}` : ""}`;
    const chain = $("chain");
    chain.replaceChildren();
    chain.hidden = !session.parent && !session.child;
    if (session.parent) chain.append(chainLink("Show the sheet below", session.parent, "chain-parent"));
    if (session.child) chain.append(chainLink("Show the sheet on top", session.child, "chain-child"));
  }

  function chainLink(text, id, testid) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.testid = testid;
    button.textContent = `${text} (${id})`;
    button.addEventListener("click", () => switchTo(id));
    return button;
  }

  // ---- Sessions ---------------------------------------------------------------------------

  /** Takes an answer about the session on screen, unless it is older than what is shown. */
  function apply(session) {
    if (!session || !state.session || session.id !== state.session.id) return;
    if (session.version < state.session.version) return;
    state.session = session;
    render();
    if (session.parent) loadParent(session.parent);
  }

  async function loadParent(id) {
    const read = await api("GET", sessionPath(id));
    state.parent = read.ok ? read.body : null;
    render();
  }

  /** Shows `session`, with a fresh event log streamed from its first event. */
  function attach(session) {
    closeStream();
    state.generation += 1;
    state.session = session;
    state.parent = null;
    state.width = null;
    state.placed = false;
    state.lastSeq = 0;
    $("event-log").replaceChildren();
    const gap = $("events-gap");
    gap.hidden = true;
    gap.textContent = "";
    delete gap.dataset.from;
    delete gap.dataset.to;
    const setup = state.setupQuery ? `${state.setupQuery}&` : "";
    history.replaceState(null, "", `/playground?${setup}session=${encodeURIComponent(session.id)}`);
    render();
    openStream(session.id);
    if (session.parent) loadParent(session.parent);
  }

  async function switchTo(id) {
    const read = await api("GET", sessionPath(id));
    if (!read.ok) return report("open", read);
    attach(read.body);
  }

  /** Reads the session again after the stream showed an event this page has not seen answered. */
  async function refresh() {
    if (state.refreshing) {
      state.refreshAgain = true;
      return;
    }
    state.refreshing = true;
    try {
      do {
        state.refreshAgain = false;
        if (!state.session) break;
        const read = await api("GET", sessionPath(state.session.id));
        if (read.ok) apply(read.body);
      } while (state.refreshAgain);
    } finally {
      state.refreshing = false;
    }
  }

  // ---- The setup form and the address --------------------------------------------------------

  /** The form as a request body (only the fields filled in) and as a query string. */
  function readForm() {
    const body = {};
    const query = new URLSearchParams();
    for (const input of $("setup-form").querySelectorAll("[data-field]")) {
      const value = input.value.trim();
      if (value === "") continue;
      query.set(input.name, value);
      if (input.dataset.field === "detents") {
        body.detents = value.split(",").map((part) => part.trim());
      } else if ("number" in input.dataset) {
        // sheetd judges the value: a number goes as a number, anything else as the text typed.
        body[input.dataset.field] = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value) ? Number(value) : value;
      } else {
        body[input.dataset.field] = value;
      }
    }
    return { body, query: query.toString() };
  }

  function fillForm(params) {
    for (const input of $("setup-form").querySelectorAll("[data-field]")) {
      input.value = params.get(input.name) || "";
    }
  }

  function clearFieldErrors() {
    for (const slot of document.querySelectorAll("[data-error-for], [data-testid=form-error]")) slot.textContent = "";
    for (const input of $("setup-form").querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
  }

  /** Puts sheetd's message next to the field it names, or under the form when it names none of them. */
  function showFieldError(answer) {
    const error = answer.error;
    const text = `${error.message} (${answer.status} ${error.code})`;
    const field = error.field ? String(error.field).replace(/[[.].*$/, "") : "";
    const slot = field ? document.querySelector(`[data-error-for="${CSS.escape(field)}"]`) : null;
    const input = field ? $("setup-form").querySelector(`[data-field="${CSS.escape(field)}"]`) : null;
    (slot || $("form-error")).textContent = text;
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
  }

  async function create(extra) {
    clearFieldErrors();
    const { body, query } = readForm();
    state.setupQuery = query;
    const answer = await api("POST", "/sessions", { ...body, ...extra });
    report(extra && extra.parent ? "open over" : "create", answer);
    if (!answer.ok) {
      showFieldError(answer);
      history.replaceState(null, "", `/playground${query ? `?${query}` : ""}`);
      return;
    }
    attach(answer.body);
  }

  async function start() {
    let params = new URLSearchParams(location.search);
    if ([...params.keys()].length === 0) {
      params = new URLSearchParams(DEMO_SETUP);
      history.replaceState(null, "", `/playground?${params}`);
    }
    fillForm(params);
    const id = params.get("session");
    params.delete("session");
    state.setupQuery = params.toString();
    if (id) {
      const read = await api("GET", sessionPath(id));
      if (read.ok) return attach(read.body);
      report("open", read);
      if (read.status !== 404) return;
    }
    await create();
  }

  // ---- Actions ----------------------------------------------------------------------------

  /** Writes the outcome of a call where the user looks: events caused, or sheetd's error. */
  function report(label, answer) {
    const status = $("status");
    status.dataset.code = answer.ok ? "" : answer.error.code;
    status.dataset.httpStatus = String(answer.status);
    status.classList.toggle("error", !answer.ok);
    if (!answer.ok) {
      status.textContent = `${label}: ${answer.status} ${answer.error.code}: ${answer.error.message}`;
      return;
    }
    const events = answer.body && Array.isArray(answer.body.events) ? answer.body.events : null;
    let text = `${label}: ${answer.status}`;
    if (events) text += events.length ? `, ${events.map((event) => event.type).join(", ")}` : ", no change";
    if (answer.body && answer.body.gesture) text += ` (gesture target ${answer.body.gesture.target})`;
    status.textContent = text;
  }

  async function act(label, action, body) {
    const session = state.session;
    if (!session) return null;
    const answer = await api("POST", `${sessionPath(session.id)}/${action}`, body);
    report(label, answer);
    if (answer.ok) apply(answer.body.session);
    else refresh();
    return answer;
  }

  async function rotate() {
    const session = state.session;
    if (!session) return;
    const height = containerHeightOf(session);
    const answer = await act("rotate", "resize", { containerHeight: state.width });
    if (answer && answer.ok) {
      state.width = height;
      render();
    }
  }

  function wireControls() {
    const on = (testid, handler) => $(testid).addEventListener("click", handler);
    on("done", () => act("done", "dismiss", { reason: "done" }));
    on("dismiss-code", () => act("dismiss by code", "dismiss", { reason: "programmatic" }));
    on("present", () => act("present again", "present"));
    on("mark-changes", () => act("mark changes", "changes", { hasChanges: !(state.session && state.session.hasChanges === true) }));
    on("select-detent", () => act("select", "select", { detent: $("select-detent-choice").value }));
    on("rotate", rotate);
    on("resize", () => {
      const text = $("resize-height").value.trim();
      act("resize", "resize", { containerHeight: text === "" ? containerHeightOf(state.session) : Number(text) });
    });
    on("push", () => act("push", "navigate", { push: $("push-screen").value.trim() }));
    on("pop", () => act("pop", "navigate", { pop: 1 }));
    on("nav-back", () => act("back", "navigate", { pop: 1 }));
    on("open-child", () => state.session && create({ parent: state.session.id }));
    for (const answer of ["save", "discard", "cancel"]) {
      on(`confirm-${answer}`, () => act(answer, "confirm", { action: answer }));
    }
    $("setup-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const { query } = readForm();
      history.pushState(null, "", `/playground${query ? `?${query}` : ""}`);
      create();
    });
    $("api-key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const key = $("api-key").value.trim();
      if (key) sessionStorage.setItem(KEY_STORAGE, key);
      else sessionStorage.removeItem(KEY_STORAGE);
      $("api-key").value = "";
      $("api-key-form").hidden = true;
      start();
    });
    window.addEventListener("popstate", () => start());
    window.addEventListener("resize", () => render());
    sheet().addEventListener("transitionend", settled);
    sheet().addEventListener("transitioncancel", settled);
  }

  function settled(event) {
    if (event.target !== sheet() || event.propertyName !== "transform") return;
    clearTimeout(state.settleTimer);
    sheet().dataset.animating = "false";
  }

  function askForKey(message) {
    $("api-key-form").hidden = false;
    $("api-key-reason").textContent = message || "sheetd asks for an API key.";
    $("api-key").focus();
  }

  // ---- Dragging ---------------------------------------------------------------------------

  function wireDragging() {
    const element = sheet();
    element.addEventListener("pointerdown", (event) => {
      const session = state.session;
      if (!session || state.sending || state.drag || session.phase === "dismissed") return;
      if (event.pointerType === "mouse" && event.button !== 0) return;
      if (event.target.closest("button, input, select")) return;
      event.preventDefault();
      element.setPointerCapture(event.pointerId);
      element.classList.remove("settling");
      element.classList.add("dragging");
      state.drag = {
        pointer: event.pointerId,
        startY: event.clientY,
        base: restingOffset(session),
        top: (containerHeightOf(session) - Math.max(...heightsOf(session).map(([, height]) => height))) * state.scale,
        samples: [{ t: event.timeStamp, y: event.clientY }],
      };
    });
    element.addEventListener("pointermove", (event) => {
      const drag = state.drag;
      if (!drag || event.pointerId !== drag.pointer) return;
      drag.samples.push({ t: event.timeStamp, y: event.clientY });
      while (drag.samples.length > 2 && drag.samples[0].t < event.timeStamp - 4 * VELOCITY_WINDOW_MS) drag.samples.shift();
      let offset = drag.base + (event.clientY - drag.startY);
      // Above the tallest detent the sheet follows at a third of the pointer, as iOS resists.
      if (offset < drag.top) offset = drag.top - (drag.top - offset) / 3;
      placeSheet(element, offset, false);
    });
    element.addEventListener("pointerup", (event) => release(event, true));
    element.addEventListener("pointercancel", (event) => release(event, false));
  }

  /**
   * The pointer's velocity at release, in CSS pixels per second, positive downward: the
   * distance covered over the last VELOCITY_WINDOW_MS before the release. A pointer that
   * rested for that long releases at 0.
   */
  function releaseVelocity(samples, time, y) {
    const recent = samples.filter((sample) => sample.t >= time - VELOCITY_WINDOW_MS && sample.t <= time);
    const first = recent.length ? recent[0] : { t: time, y };
    const elapsed = time - first.t;
    return elapsed > 0 ? ((y - first.y) / elapsed) * 1000 : 0;
  }

  async function release(event, completed) {
    const drag = state.drag;
    if (!drag || event.pointerId !== drag.pointer) return;
    state.drag = null;
    const element = sheet();
    element.classList.remove("dragging");
    const scale = state.scale;
    const translation = round2((event.clientY - drag.startY) / scale);
    const velocity = round2(releaseVelocity(drag.samples, event.timeStamp, event.clientY) / scale);
    // Less than a point of travel is a tap, not a drag: nothing to tell sheetd.
    if (!completed || Math.abs(translation) < 1) {
      render();
      placeSheet(element, restingOffset(state.session), true);
      return;
    }
    state.lastGesture = { translation, velocity };
    element.dataset.gestureTranslation = String(translation);
    element.dataset.gestureVelocity = String(velocity);
    $("info-gesture").textContent = `translation ${translation} pt, velocity ${velocity} pt/s`;
    state.sending = true;
    let answer;
    try {
      answer = await act("drag", "drag", { translation, velocity });
    } finally {
      state.sending = false;
    }
    // Animate to where sheetd put the sheet: a new detent, or back where it was when intercepted.
    if (state.session) placeSheet(element, restingOffset(state.session), true);
    if (answer && answer.ok && answer.body.gesture) {
      const gesture = answer.body.gesture;
      $("info-gesture").textContent += ` → released at ${points(gesture.releasedHeight)}, projected ${points(gesture.projectedHeight)}, target ${gesture.target}`;
    }
  }

  // ---- The live event log -----------------------------------------------------------------------

  function eventsURL(id, after) {
    return `${sessionPath(id)}/events?after=${after}`;
  }

  function streamState(text, live) {
    const label = $("stream-state");
    label.textContent = text;
    label.classList.toggle("live", live === true);
    label.dataset.state = text;
  }

  function closeStream() {
    if (state.stream) state.stream.close();
    state.stream = null;
    streamState("not connected");
  }

  /**
   * EventSource when no API key is set. It cannot send an Authorization header, so with a key
   * the page reads the same stream with fetch, which can: the key never goes into a URL.
   */
  function openStream(id) {
    const generation = state.generation;
    state.stream = storedKey() ? fetchStream(id, generation) : eventSourceStream(id, generation);
  }

  function eventSourceStream(id, generation) {
    // After the last event shown; EventSource itself resumes with Last-Event-ID on a reconnect.
    const source = new EventSource(eventsURL(id, state.lastSeq));
    const received = (message) => enqueue(message.data, generation);
    for (const type of EVENT_TYPES) source.addEventListener(type, received);
    source.addEventListener("message", received);
    source.addEventListener("open", () => streamState("live", true));
    source.addEventListener("error", () => {
      if (source.readyState !== EventSource.CLOSED) {
        streamState("reconnecting");
        return;
      }
      streamState("closed");
      // The stream was refused: find out why (401, a deleted session) and retry if it may work.
      setTimeout(() => recoverStream(id, generation), 1000);
    });
    return { close: () => source.close() };
  }

  async function recoverStream(id, generation) {
    if (generation !== state.generation) return;
    // The same resume point as a plain read says why the stream was refused.
    const read = await api("GET", eventsURL(id, state.lastSeq));
    if (generation !== state.generation) return;
    if (!read.ok && read.error.code === "events_expired") {
      if (!(await skipExpired(id, generation))) return;
    } else if (!read.ok) {
      report("event stream", read);
      if (read.status !== 0 && read.status !== 503) return;
    }
    openStream(id);
  }

  /**
   * sheetd keeps only a session's newest events (410 events_expired for a resume point older
   * than those): the page goes on from the session's version, as sheetd's answer says to, and
   * says which events it cannot show. True if the stream can be opened again.
   */
  async function skipExpired(id, generation) {
    const read = await api("GET", sessionPath(id));
    if (generation !== state.generation) return false;
    if (!read.ok) {
      report("event stream", read);
      return false;
    }
    showGap(state.lastSeq + 1, read.body.version);
    apply(read.body);
    return true;
  }

  /** Events `from`…`to` will not be in the log: says so above it, and resumes after them. */
  function showGap(from, to) {
    if (to < from) return;
    const gap = $("events-gap");
    if (!gap.dataset.from) gap.dataset.from = String(from);
    gap.dataset.to = String(to);
    gap.hidden = false;
    gap.textContent = `Events ${gap.dataset.from}–${to} are no longer kept by sheetd (it keeps a session's newest events only); the log goes on from event ${to + 1}.`;
    state.lastSeq = Math.max(state.lastSeq, to);
  }

  function fetchStream(id, generation) {
    const controller = new AbortController();
    (async () => {
      while (!controller.signal.aborted && generation === state.generation) {
        try {
          const response = await fetch(eventsURL(id, state.lastSeq), {
            headers: { Accept: "text/event-stream", Authorization: `Bearer ${storedKey()}` },
            cache: "no-store",
            signal: controller.signal,
          });
          if (!response.ok) {
            const text = await response.text();
            let error;
            try { error = JSON.parse(text).error; } catch { error = { code: `http_${response.status}`, message: text.slice(0, 300) }; }
            if (error.code === "events_expired") {
              if (await skipExpired(id, generation)) continue;
              return;
            }
            if (response.status === 401) askForKey(error.message);
            report("event stream", { ok: false, status: response.status, error });
            streamState("closed");
            return;
          }
          streamState("live", true);
          await readFrames(response.body, (data) => enqueue(data, generation));
        } catch (failure) {
          if (controller.signal.aborted) return;
        }
        streamState("reconnecting");
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    })();
    return { close: () => controller.abort() };
  }

  /** Server-Sent Events framing: `data:` lines up to a blank line make one message. */
  async function readFrames(body, deliver) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let data = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith("\r\n", end) ? 2 : 1));
        if (line === "") {
          if (data.length) deliver(data.join("\n"));
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
        }
      }
    }
  }

  function enqueue(data, generation) {
    state.logQueue = state.logQueue.then(() => received(data, generation));
  }

  async function received(text, generation) {
    if (generation !== state.generation) return;
    let event;
    try { event = JSON.parse(text); } catch { return append(text, { seq: 0, type: "unreadable" }, false); }
    if (typeof event.seq !== "number" || event.seq <= state.lastSeq) return;
    if (event.seq > state.lastSeq + 1) await recoverGap(event.seq, generation);
    if (generation !== state.generation) return;
    append(text, event, false);
    state.lastSeq = event.seq;
    if (state.session && event.seq > state.session.version) refresh();
  }

  /** Events the stream skipped (a type this page does not listen for), read from the API. */
  async function recoverGap(before, generation) {
    const read = await api("GET", eventsURL(state.session.id, state.lastSeq));
    if (generation !== state.generation) return;
    if (!read.ok) {
      if (read.error.code === "events_expired") showGap(state.lastSeq + 1, before - 1);
      return;
    }
    for (const event of read.body.events) {
      if (event.seq >= before || event.seq <= state.lastSeq) continue;
      append(JSON.stringify(event), event, true);
      state.lastSeq = event.seq;
    }
  }

  function append(text, event, recovered) {
    const log = $("event-log");
    const item = document.createElement("li");
    item.dataset.seq = String(event.seq);
    item.dataset.type = String(event.type);
    if (recovered) item.classList.add("recovered");
    const type = document.createElement("span");
    type.className = "type";
    type.textContent = `${event.seq} ${event.type}`;
    const data = document.createElement("code");
    data.textContent = text;
    item.append(type, data);
    log.append(item);
    log.scrollTop = log.scrollHeight;
  }

  document.addEventListener("DOMContentLoaded", () => {
    wireControls();
    wireDragging();
    start();
  });
})();
