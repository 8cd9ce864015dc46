//! One event as script arguments: the 12 fields `event.lua` reads, the
//! same for the direct ingest script and the pipeline's streams.

use crate::model::EventType;

/// The 12 arguments of one event (`event.lua`) onto a `Cmd` or a script
/// invocation: the direct ingest script and the pipeline's streams carry
/// the same fields.
macro_rules! event_args {
    ($c:expr, $ev:expr) => {{
        let ev = $ev;
        $c.arg(kind_char(ev.kind))
            .arg(ev.article.as_str())
            .arg(format!("{:032x}", ev.visitor))
            .arg(&ev.visitor_element()[..])
            // The ip key, and the network block when known (event.lua).
            .arg(if ev.net == 0 {
                format!("{:016x}", ev.ip)
            } else {
                format!("{:016x}{:016x}", ev.ip, ev.net)
            })
            .arg(ev.ts)
            .arg(ev.rate_clock_ms())
            .arg(ev.arrival_ms.div_euclid(1000))
            .arg(match ev.event_id {
                Some(k) => format!("{k:032x}"),
                None => String::new(),
            })
            .arg(ev.seconds)
            // bot: '0', or its crawler family's name (event.lua).
            .arg(if ev.bot.is_bot() { ev.bot.name() } else { "0" })
            .arg(if ev.trusted { "1" } else { "0" });
    }};
}
pub(crate) use event_args;

pub(crate) fn kind_char(k: EventType) -> &'static str {
    match k {
        EventType::View => "v",
        EventType::Dwell => "d",
        EventType::Like => "l",
        EventType::Comment => "c",
        EventType::Favorite => "f",
        EventType::Share => "s",
    }
}
