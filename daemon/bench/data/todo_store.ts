export type Priority = "low" | "normal" | "high";

export interface Todo {
  id: string;
  title: string;
  completed: boolean;
  priority: Priority;
  tags: string[];
  createdAt: number;
  dueAt?: number;
}

export type Filter = "all" | "active" | "completed";

export interface TodoState {
  items: Record<string, Todo>;
  order: string[];
  filter: Filter;
  lastError: string | null;
}

export type TodoAction =
  | { type: "todo/add"; payload: { title: string; priority?: Priority; tags?: string[]; dueAt?: number } }
  | { type: "todo/toggle"; payload: { id: string } }
  | { type: "todo/rename"; payload: { id: string; title: string } }
  | { type: "todo/remove"; payload: { id: string } }
  | { type: "todo/clearCompleted" }
  | { type: "filter/set"; payload: { filter: Filter } };

export type Reducer<S, A> = (state: S, action: A) => S;
export type Listener<S> = (state: S, previous: S) => void;
export type Middleware<S, A> = (store: Store<S, A>) => (next: (action: A) => void) => (action: A) => void;

export const initialState: TodoState = {
  items: {},
  order: [],
  filter: "all",
  lastError: null,
};

let idCounter = 0;

function nextId(): string {
  idCounter += 1;
  return `todo-${Date.now().toString(36)}-${idCounter}`;
}

function updateItem(state: TodoState, id: string, patch: Partial<Todo>): TodoState {
  const existing = state.items[id];
  if (!existing) {
    return { ...state, lastError: `Unknown todo: ${id}` };
  }
  return {
    ...state,
    items: { ...state.items, [id]: { ...existing, ...patch } },
    lastError: null,
  };
}

export const todoReducer: Reducer<TodoState, TodoAction> = (state, action) => {
  switch (action.type) {
    case "todo/add": {
      const title = action.payload.title.trim();
      if (!title) {
        return { ...state, lastError: "Title must not be empty" };
      }
      const todo: Todo = {
        id: nextId(),
        title,
        completed: false,
        priority: action.payload.priority ?? "normal",
        tags: action.payload.tags ?? [],
        createdAt: Date.now(),
        dueAt: action.payload.dueAt,
      };
      return {
        ...state,
        items: { ...state.items, [todo.id]: todo },
        order: [...state.order, todo.id],
        lastError: null,
      };
    }
    case "todo/toggle": {
      const current = state.items[action.payload.id];
      return updateItem(state, action.payload.id, { completed: !current?.completed });
    }
    case "todo/rename":
      return updateItem(state, action.payload.id, { title: action.payload.title.trim() });
    case "todo/remove": {
      const { [action.payload.id]: _removed, ...rest } = state.items;
      return {
        ...state,
        items: rest,
        order: state.order.filter((id) => id !== action.payload.id),
      };
    }
    case "todo/clearCompleted": {
      const keep = state.order.filter((id) => !state.items[id].completed);
      const items: Record<string, Todo> = {};
      for (const id of keep) {
        items[id] = state.items[id];
      }
      return { ...state, items, order: keep };
    }
    case "filter/set":
      return { ...state, filter: action.payload.filter };
    default:
      return state;
  }
};

export class Store<S, A> {
  private state: S;
  private listeners = new Set<Listener<S>>();
  private dispatchFn: (action: A) => void;

  constructor(private readonly reducer: Reducer<S, A>, initial: S, middleware: Middleware<S, A>[] = []) {
    this.state = initial;
    const base = (action: A): void => {
      const previous = this.state;
      this.state = this.reducer(previous, action);
      if (this.state !== previous) {
        this.listeners.forEach((listener) => listener(this.state, previous));
      }
    };
    this.dispatchFn = middleware.reduceRight((next, mw) => mw(this)(next), base);
  }

  getState(): S {
    return this.state;
  }

  dispatch(action: A): void {
    this.dispatchFn(action);
  }

  subscribe(listener: Listener<S>): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  select<T>(selector: (state: S) => T): T {
    return selector(this.state);
  }
}

export const selectVisibleTodos = (state: TodoState): Todo[] => {
  const all = state.order.map((id) => state.items[id]);
  switch (state.filter) {
    case "active":
      return all.filter((todo) => !todo.completed);
    case "completed":
      return all.filter((todo) => todo.completed);
    default:
      return all;
  }
};

export const selectCounts = (state: TodoState): { total: number; active: number; completed: number } => {
  const completed = state.order.filter((id) => state.items[id].completed).length;
  return { total: state.order.length, active: state.order.length - completed, completed };
};

export const loggerMiddleware: Middleware<TodoState, TodoAction> = (store) => (next) => (action) => {
  const before = selectCounts(store.getState());
  next(action);
  const after = selectCounts(store.getState());
  console.debug(`[todo] ${action.type}`, { before, after });
};

export function createTodoStore(preloaded: Partial<TodoState> = {}): Store<TodoState, TodoAction> {
  return new Store(todoReducer, { ...initialState, ...preloaded }, [loggerMiddleware]);
}
