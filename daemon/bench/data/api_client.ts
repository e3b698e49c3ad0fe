export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

export interface User {
  id: number;
  email: string;
  name: string;
  role: "admin" | "member";
}

export interface Project {
  id: number;
  ownerId: number;
  title: string;
  archived: boolean;
}

export interface Page<T> {
  items: T[];
  total: number;
  nextCursor: string | null;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  timeoutMs?: number;
}

export class ApiError extends Error {
  constructor(
    message: string,
    public readonly status: number,
    public readonly code: string,
    public readonly details?: unknown,
  ) {
    super(message);
    this.name = "ApiError";
  }

  get isClientError(): boolean {
    return this.status >= 400 && this.status < 500;
  }
}

export class NotFoundError extends ApiError {
  constructor(resource: string, details?: unknown) {
    super(`${resource} not found`, 404, "not_found", details);
    this.name = "NotFoundError";
  }
}

export class UnauthorizedError extends ApiError {
  constructor(details?: unknown) {
    super("Authentication required", 401, "unauthorized", details);
    this.name = "UnauthorizedError";
  }
}

export class NetworkError extends Error {
  constructor(message: string, public readonly originalError?: unknown) {
    super(message);
    this.name = "NetworkError";
  }
}

function buildQuery(query: RequestOptions["query"]): string {
  if (!query) {
    return "";
  }
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) {
      params.append(key, String(value));
    }
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

export class ApiClient {
  private token: string | null = null;

  constructor(
    private readonly baseUrl: string,
    private readonly defaultTimeoutMs = 15_000,
  ) {}

  setToken(token: string | null): void {
    this.token = token;
  }

  async request<T>(method: HttpMethod, path: string, options: RequestOptions = {}): Promise<T> {
    const url = `${this.baseUrl.replace(/\/$/, "")}${path}${buildQuery(options.query)}`;
    const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
    if (this.token) {
      headers.Authorization = `Bearer ${this.token}`;
    }
    let body: string | undefined;
    if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.body);
    }

    const controller = new AbortController();
    const timeout = setTimeout(() => controller.abort(), options.timeoutMs ?? this.defaultTimeoutMs);
    options.signal?.addEventListener("abort", () => controller.abort());

    let response: Response;
    try {
      response = await fetch(url, { method, headers, body, signal: controller.signal });
    } catch (err) {
      throw new NetworkError(`Request to ${path} failed`, err);
    } finally {
      clearTimeout(timeout);
    }

    if (response.status === 204) {
      return undefined as T;
    }
    const payload: unknown = await response.json().catch(() => null);
    if (!response.ok) {
      throw this.toError(response.status, path, payload);
    }
    return payload as T;
  }

  private toError(status: number, path: string, payload: unknown): ApiError {
    const data = (payload ?? {}) as { message?: string; code?: string };
    switch (status) {
      case 401:
        return new UnauthorizedError(payload);
      case 404:
        return new NotFoundError(path, payload);
      default:
        return new ApiError(data.message ?? `HTTP ${status}`, status, data.code ?? "http_error", payload);
    }
  }

  getCurrentUser(): Promise<User> {
    return this.request<User>("GET", "/me");
  }

  listUsers(cursor?: string, limit = 50): Promise<Page<User>> {
    return this.request<Page<User>>("GET", "/users", { query: { cursor, limit } });
  }

  getProject(id: number): Promise<Project> {
    return this.request<Project>("GET", `/projects/${id}`);
  }

  createProject(input: Pick<Project, "title">): Promise<Project> {
    return this.request<Project>("POST", "/projects", { body: input });
  }

  updateProject(id: number, patch: Partial<Omit<Project, "id" | "ownerId">>): Promise<Project> {
    return this.request<Project>("PATCH", `/projects/${id}`, { body: patch });
  }

  deleteProject(id: number): Promise<void> {
    return this.request<void>("DELETE", `/projects/${id}`);
  }

  async *iterateUsers(limit = 50): AsyncGenerator<User, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listUsers(cursor, limit);
      yield* page.items;
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  }
}
