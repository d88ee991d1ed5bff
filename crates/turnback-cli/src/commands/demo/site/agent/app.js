// Harbor Bakery: menu and orders, rewritten around a small API client.

const api = {
  base: "http://localhost:8080",
  async get(path) {
    const r = await fetch(this.base + path);
    return r.json();
  },
  async post(path, body) {
    const r = await fetch(this.base + path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    return r.ok;
  },
};

async function main() {
  const menu = await api.get("/menu");
  document.querySelector("[data-menu]").innerHTML = menu
    .map((i) => `<li class="menu-item">${i.name} <b>${i.price}</b></li>`)
    .join("");
  document.querySelector("[data-order]").onsubmit = async (e) => {
    e.preventDefault();
    const ok = await api.post("/orders", Object.fromEntries(new FormData(e.target)));
    document.querySelector("[data-status]").textContent = ok ? "Sent." : "Failed.";
  };
}

main();
