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
      shuffle: "Everyone who is here before the opening gets a place in a random order, fixed at the opening and checkable by anyone: arriving early or late before then makes no difference.",
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
      map_age: "Seat map as of {s} s ago: the hold decides who gets a seat.",
      draw_link: "How the draw works, and how to check it",
      draw_title: "Check the draw",
      draw_intro: "Before the opening the waiting room publishes a commitment: the SHA-256 of a secret seed. At the opening it publishes the seed and the list of everyone who was waiting, each as the SHA-256 of their visitor id (no personal data). Each place follows from HMAC-SHA256(seed, that id): this page recomputes every place in your browser.",
      draw_loading: "Loading the draw…",
      draw_checking: "Recomputing every place…",
      draw_commitment: "Commitment, SHA-256 of the seed",
      draw_seed: "Seed",
      draw_seed_hidden: "published at the opening",
      draw_count: "Fans in the draw",
      draw_committed: "The sale has not opened yet: only the commitment is published. Come back after the opening.",
      draw_ok: "Checked: the seed matches the commitment, the list matches its hash, and all {n} places are the ones the seed gives.",
      draw_bad_commitment: "Mismatch: the seed does not match the commitment published before the opening.",
      draw_bad_hash: "Mismatch: the list does not match its published hash.",
      draw_bad_position: "Mismatch: place {n} is not the one the seed gives.",
      draw_visitor: "Your visitor id",
      draw_find: "Find my number",
      draw_yours: "Your number in the draw: {n}.",
      draw_not_in: "This visitor id is not in the draw (it joined after the opening, or it is mistyped).",
      draw_unavailable: "The draw could not be loaded. Try again in a moment.",
      draw_no_crypto: "This browser cannot compute SHA-256 here (it needs https). Use the command line instead.",
      draw_cli: "The same check on the command line: waiting-room verify-draw <address of the draw>.",
      min: "min", s: "s"
    },
    fr: {
      title: "Vous êtes dans la salle d'attente",
      connecting: "Connexion…",
      checking: "Vérification de votre navigateur avant de vous donner une place…",
      placed: "Vous avez une place dans la salle d'attente.",
      opens_in: "La vente ouvre dans",
      shuffle: "Toutes les personnes présentes avant l'ouverture reçoivent une place tirée au sort à l'ouverture, vérifiable par tous : arriver tôt ou tard avant l'ouverture ne change rien.",
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
      map_age: "Plan des places tel qu'il y a {s} s : la réservation décide qui obtient une place.",
      draw_link: "Comment fonctionne le tirage, et comment le vérifier",
      draw_title: "Vérifier le tirage",
      draw_intro: "Avant l'ouverture, la salle d'attente publie un engagement : le SHA-256 d'une graine secrète. À l'ouverture, elle publie la graine et la liste de toutes les personnes qui attendaient, chacune sous la forme du SHA-256 de son identifiant de visiteur (aucune donnée personnelle). Chaque place découle de HMAC-SHA256(graine, cet identifiant) : cette page recalcule toutes les places dans votre navigateur.",
      draw_loading: "Chargement du tirage…",
      draw_checking: "Recalcul de toutes les places…",
      draw_commitment: "Engagement, SHA-256 de la graine",
      draw_seed: "Graine",
      draw_seed_hidden: "publiée à l'ouverture",
      draw_count: "Personnes dans le tirage",
      draw_committed: "La vente n'est pas encore ouverte : seul l'engagement est publié. Revenez après l'ouverture.",
      draw_ok: "Vérifié : la graine correspond à l'engagement, la liste à son empreinte, et les {n} places sont bien celles que donne la graine.",
      draw_bad_commitment: "Anomalie : la graine ne correspond pas à l'engagement publié avant l'ouverture.",
      draw_bad_hash: "Anomalie : la liste ne correspond pas à son empreinte publiée.",
      draw_bad_position: "Anomalie : la place {n} n'est pas celle que donne la graine.",
      draw_visitor: "Votre identifiant de visiteur",
      draw_find: "Trouver mon numéro",
      draw_yours: "Votre numéro dans le tirage : {n}.",
      draw_not_in: "Cet identifiant n'est pas dans le tirage (arrivée après l'ouverture, ou faute de frappe).",
      draw_unavailable: "Le tirage n'a pas pu être chargé. Réessayez dans un instant.",
      draw_no_crypto: "Ce navigateur ne peut pas calculer SHA-256 ici (il faut https). Utilisez plutôt la ligne de commande.",
      draw_cli: "La même vérification en ligne de commande : waiting-room verify-draw <adresse du tirage>.",
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
