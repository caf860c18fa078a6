// The waiting page's access step (issue 14): when the event needs an access code, asks for it,
// says why one was refused (unknown, used up, expired, too many tries) and sends it with the
// join; an invitation link (?invite=…) is kept for this tab only, taken out of the address bar
// and sent as X-Invitation. A fan whose code the organiser revoked is told the place is gone.
// wait.js calls Access.headers(), Access.handle(res, body) and Access.revoked(body).
window.Access = (function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const event = (new URLSearchParams(location.search).get("event") || "demo").replace(/[^a-z0-9-]/g, "");
  const inviteKey = "invite:" + event;
  let code = null;
  const params = new URLSearchParams(location.search);
  if (params.get("invite")) {
    sessionStorage.setItem(inviteKey, params.get("invite"));
    params.delete("invite");
    history.replaceState(null, "", location.pathname + "?" + params.toString());
  }
  const CODE_KINDS = {
    "/problems/code-required": null,
    "/problems/code-unknown": "code_unknown",
    "/problems/code-used-up": "code_used_up",
    "/problems/code-expired": "code_expired",
    "/problems/code-attempts-limited": "code_limited",
  };
  const INVITE_KINDS = {
    "/problems/invitation-required": "invitation_required",
    "/problems/invitation-invalid": "invitation_invalid",
    "/problems/invitation-expired": "invitation_expired",
    "/problems/invitation-other-event": "invitation_other_event",
    "/problems/invitation-key-missing": "invitation_not_ready",
  };

  function headers() {
    const h = {};
    if (code) h["X-Access-Code"] = code;
    const invite = sessionStorage.getItem(inviteKey);
    if (invite) h["X-Invitation"] = invite;
    return h;
  }

  // Shows the code form (with the reason of a refusal) and resolves with the typed code.
  function ask(reasonKey, retryAfter) {
    const form = $("code-form");
    form.hidden = false;
    $("state").textContent = T("code_state");
    const err = $("code-error");
    err.hidden = !reasonKey;
    err.textContent = reasonKey ? T(reasonKey, {s: retryAfter || 60}) : "";
    (reasonKey ? err : $("code-input")).focus();
    return new Promise(function (resolve) {
      form.onsubmit = function (e) {
        e.preventDefault();
        const typed = $("code-input").value.trim();
        if (!typed) { err.hidden = false; err.textContent = T("code_empty"); err.focus(); return; }
        code = typed;
        form.hidden = true;
        $("state").textContent = T("code_checking");
        resolve();
      };
    });
  }

  // A refused join: resolves once the fan typed a code to try (true), or says why the fan
  // cannot join (false: an invitation problem, which only a new link solves).
  async function handle(res, body) {
    const type = body && body.type;
    if (type in CODE_KINDS) {
      code = null;
      await ask(CODE_KINDS[type], res.headers.get("Retry-After"));
      return true;
    }
    if (type in INVITE_KINDS) {
      $("access-refused").hidden = false;
      $("access-refused-text").textContent = T(INVITE_KINDS[type]);
      $("state").textContent = T("invitation_state");
      return false;
    }
    return null; // not an access refusal
  }

  function revoked(body) {
    if (!(body && body.type === "/problems/code-revoked")) return false;
    for (const id of ["queue-box", "leave-box", "countdown-box"]) $(id).hidden = true;
    $("access-refused").hidden = false;
    $("access-refused-text").textContent = T("code_revoked");
    $("state").textContent = T("code_revoked_state");
    return true;
  }

  return { headers, handle, revoked };
})();
