//! Check 16: stock buckets. A product split into buckets keeps, in each bucket,
//! `initial − lent + borrowed = stock + pending + confirmed`; its loans cancel out over the
//! buckets; no buyer is left holding a place while borrowing; and a sale that sold out left
//! no unit in any bucket (a buyer sent to an empty bucket borrows, so no unit is stranded).
//! The product-wide checks (1-3) compare the summed buckets with MySQL and the buyers.

use super::{AuditInput, CheckResult};

/// Check 16, for a product split into buckets (none otherwise).
pub fn run(input: &AuditInput) -> Vec<CheckResult> {
    if input.mysql.buckets <= 1 && input.redis.buckets.len() <= 1 {
        return vec![];
    }
    vec![buckets_balance(input)]
}

fn buckets_balance(input: &AuditInput) -> CheckResult {
    let buckets = &input.redis.buckets;
    let mut problems = vec![];
    if buckets.len() != usize::from(input.mysql.buckets) {
        problems.push(format!(
            "MySQL says {} buckets, Redis shows {}",
            input.mysql.buckets,
            buckets.len()
        ));
    }
    for b in buckets {
        let (Some(stock), Some(initial)) = (b.stock, b.initial) else {
            problems.push(format!(
                "bucket {} has no stock or initial in Redis",
                b.bucket
            ));
            continue;
        };
        let holds = stock + b.pending + b.confirmed;
        if initial - b.lent + b.borrowed != holds {
            problems.push(format!(
                "bucket {}: initial {initial} − lent {} + borrowed {} = {} but stock {stock} + \
                 pending {} + confirmed {} = {holds}",
                b.bucket,
                b.lent,
                b.borrowed,
                initial - b.lent + b.borrowed,
                b.pending,
                b.confirmed
            ));
        }
        if b.borrowing != 0 {
            problems.push(format!(
                "bucket {}: {} buyers still hold a place while borrowing",
                b.bucket, b.borrowing
            ));
        }
    }
    // A sale that sold out leaves no unit in any bucket, but for those check 7 excuses (a
    // buyer never told of a ticket that then failed, an order cancelled after the last buyer).
    let left: i64 = buckets.iter().filter_map(|b| b.stock).sum();
    let (allowed, excused) = super::sale_ended::leftover_allowed(input);
    if input.until_sold_out && input.history.sold_out_reached == Some(true) && left > allowed {
        problems.push(format!(
            "the sale sold out, yet its buckets still hold {left} units (at most {allowed}: \
             {excused})"
        ));
    }
    let lent: i64 = buckets.iter().map(|b| b.lent).sum();
    let borrowed: i64 = buckets.iter().map(|b| b.borrowed).sum();
    if lent != borrowed {
        problems.push(format!("{lent} units lent but {borrowed} borrowed"));
    }
    let found = format!(
        "{} buckets; stock {}; confirmed {}; loans {lent}",
        buckets.len(),
        buckets
            .iter()
            .map(|b| b.stock.map_or("none".into(), |s| s.to_string()))
            .collect::<Vec<_>>()
            .join("/"),
        buckets
            .iter()
            .map(|b| b.confirmed.to_string())
            .collect::<Vec<_>>()
            .join("/"),
    );
    let mut r = CheckResult::new(16, "buckets balance", problems.is_empty(), found);
    r.problems = problems;
    r
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::sale;
    use super::super::Status;
    use super::*;
    use seckill_shared::sale::BucketCounts;

    fn bucket(bucket: u16, initial: i64, stock: i64, confirmed: i64) -> BucketCounts {
        BucketCounts {
            bucket,
            stock: Some(stock),
            initial: Some(initial),
            confirmed,
            ..Default::default()
        }
    }

    #[test]
    fn balanced_buckets_with_loans_pass() {
        let mut input = sale(10);
        // Bucket 0 sold its 5 and lent 1 to bucket 1, whose buyers bought 6.
        let mut a = bucket(0, 5, 0, 4);
        a.lent = 1;
        let mut b = bucket(1, 5, 0, 6);
        b.borrowed = 1;
        input.redis.buckets = vec![a, b];
        input.mysql.buckets = 2;
        let r = buckets_balance(&input);
        assert_eq!(r.status, Status::Pass, "{r:?}");
    }

    #[test]
    fn a_unit_left_in_a_bucket_of_a_sold_out_sale_fails() {
        let mut input = sale(10);
        input.redis.buckets = vec![bucket(0, 5, 0, 5), bucket(1, 5, 1, 4)];
        input.mysql.buckets = 2;
        let r = buckets_balance(&input);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("still hold 1 units"), "{r:?}");
        // An order of 1 unit cancelled after the load's last answer excuses it.
        let mut late = input.clone();
        let mut order = super::super::OrderRow::confirmed(1, "t", 1);
        order.status = seckill_shared::OrderStatus::Cancelled;
        late.mysql.orders.push(order);
        let r = buckets_balance(&late);
        assert_eq!(r.status, Status::Pass, "{r:?}");
    }

    #[test]
    fn unbalanced_loans_and_a_stuck_borrow_fail() {
        let mut input = sale(10);
        let mut a = bucket(0, 5, 0, 4);
        a.lent = 1;
        let mut b = bucket(1, 5, 0, 5);
        b.borrowing = 1;
        input.redis.buckets = vec![a, b];
        input.mysql.buckets = 2;
        let r = buckets_balance(&input);
        assert_eq!(r.status, Status::Fail);
        let all = r.problems.join("; ");
        assert!(all.contains("1 units lent but 0 borrowed"), "{all}");
        assert!(all.contains("borrowing"), "{all}");
    }

    #[test]
    fn a_product_in_one_piece_has_no_such_check() {
        let mut input = sale(3);
        input.mysql.buckets = 1;
        assert!(run(&input).is_empty());
        input.mysql.buckets = 2;
        let r = run(&input);
        assert_eq!(r[0].status, Status::Fail, "Redis shows no buckets: {r:?}");
    }
}
