//! The account page's time zone: the zone a user's machine schedules are
//! read in (an IANA name such as Europe/Paris; UTC until chosen).

use crate::{
    api::schedules::{my_time_zone, SetMyTimeZone},
    components::form_error::{error, FormError},
};
use leptos::prelude::*;

#[component]
pub fn TimeZoneCard() -> impl IntoView {
    let save = ServerAction::<SetMyTimeZone>::new();
    let current = Resource::new(move || save.version().get(), |_| my_time_zone());
    view! {
        <section class="card stack narrow" data-testid="time-zone">
            <h2>"Time zone"</h2>
            <p class="muted small">"Your machines' daily stop and start times are in this zone, daylight saving included."</p>
            <Suspense fallback=|| ()>
                {move || current.get().and_then(Result::ok).map(|tz| view! {
                    <ActionForm action=save attr:class="stack" attr:data-testid="time-zone-form">
                        <label>"Time zone (IANA name, e.g. Europe/Paris, America/New_York, UTC)"
                            <input type="text" name="time_zone" required maxlength="64" value=tz data-testid="time-zone-input"/>
                        </label>
                        <button type="submit">"Save time zone"</button>
                    </ActionForm>
                })}
            </Suspense>
            <FormError message=error(save)/>
        </section>
    }
}
