// Harbor Bakery: the menu and pickup orders.

const API_URL = document.documentElement.dataset.api || "/api";

async function loadMenu() {
  const list = document.querySelector("[data-menu]");
  const response = await fetch(`${API_URL}/menu`);
  if (!response.ok) {
    list.textContent = "The menu is not available right now.";
    return;
  }
  const items = await response.json();
  for (const item of items) {
    const li = document.createElement("li");
    li.className = "menu-item";
    li.innerHTML = `<span class="price">${item.price}</span><h3>${item.name}</h3>`;
    list.append(li);
  }
}

async function sendOrder(event) {
  event.preventDefault();
  const status = document.querySelector("[data-status]");
  const form = new FormData(event.target);
  const response = await fetch(`${API_URL}/orders`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(Object.fromEntries(form)),
  });
  status.classList.toggle("error", !response.ok);
  status.textContent = response.ok
    ? "Thank you! Your order is waiting for you."
    : "Your order could not be sent; please call us.";
}

document.querySelector("[data-order]").addEventListener("submit", sendOrder);
loadMenu();
