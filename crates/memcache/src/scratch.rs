//! Vectors a connection keeps from batch to batch whose elements borrow
//! each batch's bytes (its requests, their pending answers): emptied and
//! handed to the next batch with their allocation, so a batch allocates
//! none of them.

/// `items` emptied, its allocation kept, for elements of another lifetime
/// (`T` and `U` are one type but for lifetimes: collecting a vector's own
/// iterator into a vector of an element of the same size and alignment
/// reuses its allocation).
pub fn recycle<T, U>(items: Vec<T>) -> Vec<U> {
    items.into_iter().filter_map(|_| None).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_vector_is_empty_and_keeps_its_allocation() {
        let text = String::from("a b");
        let mut words: Vec<&str> = Vec::with_capacity(8);
        words.extend(text.split(' '));
        let (at, capacity) = (words.as_ptr() as usize, words.capacity());
        let again: Vec<&'static str> = recycle(words);
        assert!(again.is_empty());
        assert_eq!((again.as_ptr() as usize, again.capacity()), (at, capacity));
    }
}
