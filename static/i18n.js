// Fan-page strings in English and French, chosen from the browser's languages (navigator.languages).
// Usage: T("key", {n: 3}) and elements with data-i18n="key" filled by applyI18n().
(function () {
  "use strict";
  const STRINGS = {
    en: {
      title: "You are in the waiting room",
      connecting: "Connecting…",
      checking: "Checking your browser before giving you a place…",
      placed: "You have a place in the waiting room.",
      opens_in: "The sale opens in",
      shuffle: "Everyone who is here before the opening gets a place in a random order, fixed at the opening: arriving early or late before then makes no difference.",
      your_number: "Your queue number:",
      ahead: "People ahead of you:",
      progress: "Progress through the queue",
      wait: "Estimated wait:",
      wait_range: "{lo} to {hi}",
      admitted: "It is your turn! Taking you to the booking page…",
      trouble: "We are having trouble reaching the queue. Keep this page open: your place is kept.",
      keep_open: "Keep this page open. Refreshing it keeps your place.",
      prequeue: "The sale has not opened yet.",
      opening: "The sale is opening: places are being drawn.",
      open: "The sale is open. You are in line.",
      paused: "The sale is paused for a moment. Your place is kept.",
      waiting_for_stock: "Every ticket left is in someone's basket right now ({n} in play). Some usually come back when baskets expire: the line moves again as soon as they do. Your place is kept.",
      closed: "The sale is closed.",
      sold_out: "Sold out. Thank you for waiting.",
      console_opens_in: "Opens in",
      min: "min", s: "s"
    },
    fr: {
      title: "Vous êtes dans la salle d'attente",
      connecting: "Connexion…",
      checking: "Vérification de votre navigateur avant de vous donner une place…",
      placed: "Vous avez une place dans la salle d'attente.",
      opens_in: "La vente ouvre dans",
      shuffle: "Toutes les personnes présentes avant l'ouverture reçoivent une place tirée au sort à l'ouverture : arriver tôt ou tard avant l'ouverture ne change rien.",
      your_number: "Votre numéro :",
      ahead: "Personnes devant vous :",
      progress: "Progression dans la file",
      wait: "Attente estimée :",
      wait_range: "de {lo} à {hi}",
      admitted: "C'est votre tour ! Nous vous emmenons vers la réservation…",
      trouble: "Nous avons du mal à joindre la file. Gardez cette page ouverte : votre place est conservée.",
      keep_open: "Gardez cette page ouverte. L'actualiser conserve votre place.",
      prequeue: "La vente n'est pas encore ouverte.",
      opening: "La vente ouvre : les places sont tirées au sort.",
      open: "La vente est ouverte. Vous êtes dans la file.",
      paused: "La vente est en pause. Votre place est conservée.",
      waiting_for_stock: "Tous les billets restants sont dans des paniers en ce moment ({n} en jeu). Certains reviennent souvent quand les paniers expirent : la file repart dès que c'est le cas. Votre place est conservée.",
      closed: "La vente est terminée.",
      sold_out: "Complet. Merci d'avoir patienté.",
      console_opens_in: "Ouverture dans",
      min: "min", s: "s"
    }
  };
  const wanted = (navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || "en"]);
  let lang = "en";
  for (const l of wanted) {
    const base = String(l).toLowerCase().split("-")[0];
    if (STRINGS[base]) { lang = base; break; }
  }
  window.LANG = lang;
  window.T = function (key, vars) {
    let s = (STRINGS[lang] && STRINGS[lang][key]) || STRINGS.en[key] || key;
    for (const k in (vars || {})) s = s.replace("{" + k + "}", vars[k]);
    return s;
  };
  window.applyI18n = function () {
    document.documentElement.lang = lang;
    for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = T(el.dataset.i18n);
    for (const el of document.querySelectorAll("[data-i18n-label]")) el.setAttribute("aria-label", T(el.dataset.i18nLabel));
  };
})();
