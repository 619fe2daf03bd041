package org.example.accounts;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;

/** A ledger of postings against one account. */
public class Ledger {
    private final String account;
    private final List<Posting> postings = new ArrayList<>();

    public Ledger(String account) {
        this.account = account;
    }

    /** One entry: an amount and what it was for. */
    public record Posting(BigDecimal amount, String memo) {}

    public void post(BigDecimal amount, String memo) {
        if (amount.signum() == 0) {
            throw new IllegalArgumentException("zero posting for " + account);
        }
        postings.add(new Posting(amount, memo));
    }

    public BigDecimal balance() {
        BigDecimal total = BigDecimal.ZERO;
        for (Posting p : postings) {
            total = total.add(p.amount());
        }
        return total;
    }

    public List<Posting> debits() {
        List<Posting> out = new ArrayList<>();
        for (Posting p : postings) {
            if (p.amount().signum() < 0) {
                out.add(p);
            }
        }
        return out;
    }

    @Override
    public String toString() {
        return "Ledger[" + account + ", " + postings.size() + " postings, balance " + balance() + "]";
    }
}
