//! With direct I/O turned off (`set_direct_io(false)`, the contrast runs'
//! `--direct-io off`), every file goes through the page cache and the same
//! calls still read and write the same bytes. Its own test binary: the
//! switch is process-wide.

use shoal_io::aligned::AlignedBuf;
use shoal_io::{Appender, File, IoClass};

#[test]
fn with_direct_io_off_files_go_through_the_page_cache() {
    shoal_io::set_direct_io(false);
    let dir = std::env::temp_dir().join(format!("shoal-io-buffered-{}", std::process::id()));
    shoal_io::block_on(async {
        shoal_io::create_dir_all(&dir, IoClass::Maintenance).await.expect("create dir");
        let appended = dir.join("appended");
        let mut appender = Appender::create(&appended, IoClass::Flush).await.expect("create");
        appender.append(&[7; 5000]).await.expect("append");
        appender.finish().await.expect("finish");

        let reader = File::open(&appended, IoClass::Query).await.expect("open");
        assert!(!reader.is_direct());
        assert_eq!(reader.read_exact_at(4990, 10, IoClass::Query).await.expect("read")[..], [7; 10]);
        assert_eq!(reader.len().await.expect("len"), 5000, "truncated to what was appended");

        let segment = File::open_direct_rw(&dir.join("segment"), IoClass::Commitlog).await.expect("open");
        assert!(!segment.is_direct());
        let (written, _) = segment.write_aligned_at(0, AlignedBuf::zeroed(4096), IoClass::Commitlog).await;
        written.expect("an aligned write to a buffered file");
    });
    let _ = std::fs::remove_dir_all(&dir);
}
