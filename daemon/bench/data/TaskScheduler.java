import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.PriorityQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;

public class TaskScheduler {

    private static final Logger LOG = Logger.getLogger(TaskScheduler.class.getName());

    public enum Priority {
        LOW(0), NORMAL(5), HIGH(10), CRITICAL(20);

        private final int weight;

        Priority(int weight) {
            this.weight = weight;
        }

        public int weight() {
            return weight;
        }
    }

    @FunctionalInterface
    public interface Task {
        void run() throws Exception;
    }

    public interface TaskListener {
        default void onStart(ScheduledTask task) {}
        default void onSuccess(ScheduledTask task, long elapsedMillis) {}
        default void onFailure(ScheduledTask task, Exception error) {}
    }

    public static final class ScheduledTask {
        private final long id;
        private final String name;
        private final Priority priority;
        private final long runAt;
        private final long sequence;
        private final Task task;
        private int attempts;

        ScheduledTask(long id, String name, Priority priority, long runAt, long sequence, Task task) {
            this.id = id;
            this.name = name;
            this.priority = priority;
            this.runAt = runAt;
            this.sequence = sequence;
            this.task = task;
        }

        public long getId() { return id; }
        public String getName() { return name; }
        public Priority getPriority() { return priority; }
        public long getRunAt() { return runAt; }
        public int getAttempts() { return attempts; }

        @Override
        public String toString() {
            return "ScheduledTask{" + id + ", " + name + ", " + priority + ", runAt=" + runAt + "}";
        }
    }

    private static final Comparator<ScheduledTask> ORDER = Comparator
            .comparingLong((ScheduledTask t) -> t.runAt)
            .thenComparing(t -> -t.priority.weight())
            .thenComparingLong(t -> t.sequence);

    private final PriorityQueue<ScheduledTask> queue = new PriorityQueue<>(ORDER);
    private final List<TaskListener> listeners = new ArrayList<>();
    private final AtomicLong ids = new AtomicLong();
    private final AtomicLong sequence = new AtomicLong();
    private final LongSupplier clock;
    private final int maxAttempts;
    private final long retryDelayMillis;

    public TaskScheduler(LongSupplier clock, int maxAttempts, long retryDelayMillis) {
        if (maxAttempts < 1) {
            throw new IllegalArgumentException("maxAttempts must be at least 1");
        }
        this.clock = clock;
        this.maxAttempts = maxAttempts;
        this.retryDelayMillis = retryDelayMillis;
    }

    public TaskScheduler() {
        this(System::currentTimeMillis, 3, 1_000L);
    }

    public void addListener(TaskListener listener) {
        listeners.add(listener);
    }

    public synchronized long schedule(String name, Priority priority, long delayMillis, Task task) {
        long id = ids.incrementAndGet();
        long runAt = clock.getAsLong() + Math.max(0, delayMillis);
        queue.add(new ScheduledTask(id, name, priority, runAt, sequence.incrementAndGet(), task));
        return id;
    }

    public long submit(String name, Task task) {
        return schedule(name, Priority.NORMAL, 0, task);
    }

    public synchronized boolean cancel(long taskId) {
        return queue.removeIf(t -> t.id == taskId);
    }

    public synchronized Optional<ScheduledTask> peekNext() {
        return Optional.ofNullable(queue.peek());
    }

    public synchronized int pendingCount() {
        return queue.size();
    }

    private synchronized ScheduledTask pollDue(long now) {
        ScheduledTask head = queue.peek();
        if (head == null || head.runAt > now) {
            return null;
        }
        return queue.poll();
    }

    private synchronized void requeue(ScheduledTask failed, long now) {
        ScheduledTask retry = new ScheduledTask(failed.id, failed.name, failed.priority,
                now + retryDelayMillis * failed.attempts, sequence.incrementAndGet(), failed.task);
        retry.attempts = failed.attempts;
        queue.add(retry);
    }

    /**
     * Runs every task that is due at the current clock time.
     *
     * @return the number of tasks that completed successfully
     */
    public int runDueTasks() {
        int completed = 0;
        ScheduledTask next;
        while ((next = pollDue(clock.getAsLong())) != null) {
            next.attempts++;
            for (TaskListener listener : listeners) {
                listener.onStart(next);
            }
            long started = clock.getAsLong();
            try {
                next.task.run();
                long elapsed = clock.getAsLong() - started;
                completed++;
                for (TaskListener listener : listeners) {
                    listener.onSuccess(next, elapsed);
                }
            } catch (Exception e) {
                LOG.log(Level.WARNING, "Task " + next.name + " failed on attempt " + next.attempts, e);
                for (TaskListener listener : listeners) {
                    listener.onFailure(next, e);
                }
                if (next.attempts < maxAttempts) {
                    requeue(next, clock.getAsLong());
                }
            }
        }
        return completed;
    }

    public static void main(String[] args) {
        TaskScheduler scheduler = new TaskScheduler(System::currentTimeMillis, 2, 0);
        scheduler.addListener(new TaskListener() {
            @Override
            public void onSuccess(ScheduledTask task, long elapsedMillis) {
                System.out.println("done: " + task.getName() + " in " + elapsedMillis + "ms");
            }
        });
        scheduler.schedule("cleanup", Priority.LOW, 0, () -> System.out.println("cleaning up"));
        scheduler.schedule("alert", Priority.CRITICAL, 0, () -> System.out.println("sending alert"));
        scheduler.submit("flaky", () -> {
            throw new IllegalStateException("not ready");
        });
        System.out.println("completed " + scheduler.runDueTasks() + " tasks");
    }
}
