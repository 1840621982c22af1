// A tiny client-side router: maps paths like /users/42/posts to handlers,
// keeps the browser history in step, and intercepts clicks on local links.
export class Router {
  #routes = [];
  #notFound = () => { document.body.textContent = 'Not found'; };

  add(pattern, handler) {
    const names = [];
    const source = pattern.replace(/\/:([A-Za-z_][A-Za-z0-9_]*)/g, (_, name) => {
      names.push(name);
      return '/([^/]+)';
    });
    this.#routes.push({ regex: new RegExp(`^${source}/?$`), names, handler });
    return this;
  }

  otherwise(handler) {
    this.#notFound = handler;
    return this;
  }

  resolve(path = window.location.pathname) {
    for (const { regex, names, handler } of this.#routes) {
      const match = regex.exec(path);
      if (!match) continue;
      const params = Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(match[i + 1])]));
      return handler(params);
    }
    return this.#notFound(path);
  }

  navigate(path, { replace = false } = {}) {
    if (replace) history.replaceState(null, '', path);
    else history.pushState(null, '', path);
    return this.resolve(path);
  }

  start() {
    window.addEventListener('popstate', () => this.resolve());
    document.addEventListener('click', (event) => {
      const link = event.target.closest('a[href]');
      if (!link || link.origin !== window.location.origin || event.metaKey || event.ctrlKey) return;
      event.preventDefault();
      this.navigate(link.pathname + link.search);
    });
    return this.resolve();
  }
}

const router = new Router()
  .add('/', () => render('<h1>Home</h1>'))
  .add('/users/:id', ({ id }) => fetch(`/api/users/${id}`).then((r) => r.json()).then(showUser))
  .add('/users/:id/posts/:post', ({ id, post }) => showPost(Number(id), Number(post)))
  .otherwise((path) => render(`<p>No page at <code>${escapeHtml(path)}</code></p>`));

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function render(html) { document.querySelector('#app').innerHTML = html; }
function showUser(user) { render(`<h2>${escapeHtml(user.name)}</h2><p>${user.posts.length} posts</p>`); }
function showPost(userId, postId) { render(`<p>Post ${postId} by user ${userId}</p>`); }

router.start();
