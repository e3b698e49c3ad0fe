import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.UUID;

public class BankAccount {

    public enum TransactionType { DEPOSIT, WITHDRAWAL, TRANSFER_IN, TRANSFER_OUT, INTEREST }

    public static class InsufficientFundsException extends Exception {
        private final BigDecimal shortfall;

        public InsufficientFundsException(String accountId, BigDecimal shortfall) {
            super("Account " + accountId + " is short by " + shortfall);
            this.shortfall = shortfall;
        }

        public BigDecimal getShortfall() {
            return shortfall;
        }
    }

    public static class AccountFrozenException extends RuntimeException {
        public AccountFrozenException(String accountId) {
            super("Account " + accountId + " is frozen");
        }
    }

    public static final class Transaction {
        private final String id;
        private final TransactionType type;
        private final BigDecimal amount;
        private final BigDecimal balanceAfter;
        private final Instant timestamp;
        private final String memo;

        Transaction(TransactionType type, BigDecimal amount, BigDecimal balanceAfter, String memo) {
            this.id = UUID.randomUUID().toString();
            this.type = type;
            this.amount = amount;
            this.balanceAfter = balanceAfter;
            this.timestamp = Instant.now();
            this.memo = memo;
        }

        public String getId() { return id; }
        public TransactionType getType() { return type; }
        public BigDecimal getAmount() { return amount; }
        public BigDecimal getBalanceAfter() { return balanceAfter; }
        public Instant getTimestamp() { return timestamp; }
        public String getMemo() { return memo; }

        @Override
        public String toString() {
            return String.format("%s %-12s %10s -> %10s %s", timestamp, type, amount, balanceAfter, memo);
        }
    }

    private static final int SCALE = 2;

    private final String accountId;
    private final String owner;
    private final BigDecimal overdraftLimit;
    private final List<Transaction> transactions = new ArrayList<>();
    private BigDecimal balance = BigDecimal.ZERO.setScale(SCALE);
    private boolean frozen;

    public BankAccount(String accountId, String owner, BigDecimal overdraftLimit) {
        this.accountId = Objects.requireNonNull(accountId, "accountId");
        this.owner = Objects.requireNonNull(owner, "owner");
        if (overdraftLimit.signum() < 0) {
            throw new IllegalArgumentException("overdraftLimit must not be negative");
        }
        this.overdraftLimit = normalize(overdraftLimit);
    }

    public BankAccount(String accountId, String owner) {
        this(accountId, owner, BigDecimal.ZERO);
    }

    private static BigDecimal normalize(BigDecimal amount) {
        return amount.setScale(SCALE, RoundingMode.HALF_EVEN);
    }

    private static BigDecimal requirePositive(BigDecimal amount) {
        if (amount == null || amount.signum() <= 0) {
            throw new IllegalArgumentException("amount must be positive: " + amount);
        }
        return normalize(amount);
    }

    private void ensureActive() {
        if (frozen) {
            throw new AccountFrozenException(accountId);
        }
    }

    private void checkFunds(BigDecimal value) throws InsufficientFundsException {
        BigDecimal available = balance.add(overdraftLimit);
        if (value.compareTo(available) > 0) {
            throw new InsufficientFundsException(accountId, value.subtract(available));
        }
    }

    private Transaction record(TransactionType type, BigDecimal amount, String memo) {
        Transaction tx = new Transaction(type, amount, balance, memo);
        transactions.add(tx);
        return tx;
    }

    public synchronized Transaction deposit(BigDecimal amount, String memo) {
        ensureActive();
        BigDecimal value = requirePositive(amount);
        balance = balance.add(value);
        return record(TransactionType.DEPOSIT, value, memo);
    }

    public synchronized Transaction withdraw(BigDecimal amount, String memo) throws InsufficientFundsException {
        ensureActive();
        BigDecimal value = requirePositive(amount);
        checkFunds(value);
        balance = balance.subtract(value);
        return record(TransactionType.WITHDRAWAL, value, memo);
    }

    public void transferTo(BankAccount target, BigDecimal amount) throws InsufficientFundsException {
        if (target == this) {
            throw new IllegalArgumentException("cannot transfer to the same account");
        }
        BankAccount first = accountId.compareTo(target.accountId) < 0 ? this : target;
        BankAccount second = first == this ? target : this;
        synchronized (first) {
            synchronized (second) {
                ensureActive();
                target.ensureActive();
                BigDecimal value = requirePositive(amount);
                checkFunds(value);
                balance = balance.subtract(value);
                record(TransactionType.TRANSFER_OUT, value, "transfer to " + target.accountId);
                target.balance = target.balance.add(value);
                target.record(TransactionType.TRANSFER_IN, value, "transfer from " + accountId);
            }
        }
    }

    public synchronized Transaction applyInterest(BigDecimal annualRate, int periodsPerYear) {
        ensureActive();
        if (balance.signum() <= 0) {
            return null;
        }
        BigDecimal periodic = annualRate.divide(BigDecimal.valueOf(periodsPerYear), 10, RoundingMode.HALF_EVEN);
        BigDecimal interest = normalize(balance.multiply(periodic));
        if (interest.signum() == 0) {
            return null;
        }
        balance = balance.add(interest);
        return record(TransactionType.INTEREST, interest, "interest @ " + annualRate);
    }

    public synchronized void freeze() { frozen = true; }
    public synchronized void unfreeze() { frozen = false; }

    public synchronized BigDecimal getBalance() { return balance; }
    public String getAccountId() { return accountId; }
    public String getOwner() { return owner; }
    public boolean isFrozen() { return frozen; }

    public synchronized List<Transaction> getTransactions() {
        return Collections.unmodifiableList(new ArrayList<>(transactions));
    }

    public static void main(String[] args) throws InsufficientFundsException {
        BankAccount alice = new BankAccount("ACC-001", "Alice", new BigDecimal("100"));
        BankAccount bob = new BankAccount("ACC-002", "Bob");
        alice.deposit(new BigDecimal("250.00"), "salary");
        alice.transferTo(bob, new BigDecimal("300"));
        bob.applyInterest(new BigDecimal("0.05"), 12);
        try {
            alice.withdraw(new BigDecimal("100"), "rent");
        } catch (InsufficientFundsException e) {
            System.out.println(e.getMessage());
        }
        alice.getTransactions().forEach(System.out::println);
        bob.getTransactions().forEach(System.out::println);
    }
}
